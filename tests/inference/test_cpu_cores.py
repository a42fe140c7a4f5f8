"""How vLLM's CPU engine is set up: the cores it keeps for its scheduler (none on a small
machine, where reserving one halves the cores that generate; docs/benchmarks.md, "vLLM on 2
vCPUs"; vLLM's own choice on larger ones) and its KV block size (32 tokens, so the prefix
cache shares short prompts), each unless set."""

from __future__ import annotations

from pathlib import Path

import pytest

from cobalt.inference.launcher import cpu_workarounds, server_command, server_environment
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


def test_cpu_kv_blocks_are_small_and_batches_large_unless_set() -> None:
    _, args = cpu_workarounds(InferenceSettings(), usable_cores=2)
    assert args[args.index("--block-size") + 1] == "32"
    assert args[args.index("--max-num-seqs") + 1] == "256"
    chosen = InferenceSettings(cpu_block_size=128, cpu_max_num_seqs=64)
    _, args = cpu_workarounds(chosen, usable_cores=2)
    assert args[args.index("--block-size") + 1] == "128"
    assert args[args.index("--max-num-seqs") + 1] == "64"


def test_a_block_size_passed_through_serve_wins() -> None:
    settings = InferenceSettings(model=Path("/models/m"))
    command = server_command(settings, "cpu", extra_args=["--block-size", "64"])
    sizes = [command[i + 1] for i, arg in enumerate(command) if arg == "--block-size"]
    assert sizes == ["64"]
    # The launcher's other choices stay, whatever values the user's options carry.
    assert command[command.index("--max-num-seqs") + 1] == "256"
    command = server_command(settings, "cpu", extra_args=["--block-size=128", "--seed", "256"])
    assert "--block-size" not in command and command[-3:] == ["--block-size=128", "--seed", "256"]
    assert command[command.index("--max-num-seqs") + 1] == "256"
    assert "--enforce-eager" in command
    assert "--block-size" in server_command(settings, "cpu")


@pytest.mark.parametrize("size", [0, 8, 40])
def test_a_block_size_vllm_cannot_take_is_refused(size: int) -> None:
    with pytest.raises(ValueError, match="cpu_block_size"):
        InferenceSettings(cpu_block_size=size)
