"""How many cores vLLM's CPU engine keeps for its scheduler: none on a small machine, where
reserving one halves the cores that generate (docs/benchmarks.md, "vLLM on 2 vCPUs"), vLLM's
own choice on larger ones, and the setting when one is given."""

from __future__ import annotations

import pytest

from cobalt.inference.launcher import cpu_workarounds, server_environment
from cobalt.inference.settings import InferenceSettings


@pytest.mark.parametrize(
    ("cores", "setting", "expected"),
    [(2, None, "0"), (4, None, "0"), (16, None, None), (16, 0, "0"), (2, 1, "1")],
)
def test_reserved_cores_follow_the_machine_unless_set(
    cores: int, setting: int | None, expected: str | None
) -> None:
    settings = InferenceSettings(cpu_reserved_cores=setting)
    env, _ = cpu_workarounds(settings, usable_cores=cores)
    assert env.get("VLLM_CPU_NUM_OF_RESERVED_CPU") == expected


def test_the_setting_reaches_the_cpu_server_environment_only() -> None:
    settings = InferenceSettings(cpu_reserved_cores=1)
    assert server_environment(settings, "cpu", base={})["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "1"
    assert "VLLM_CPU_NUM_OF_RESERVED_CPU" not in server_environment(settings, "cuda", base={})


def test_a_negative_count_is_refused() -> None:
    with pytest.raises(ValueError, match="cpu_reserved_cores"):
        InferenceSettings(cpu_reserved_cores=-1)
