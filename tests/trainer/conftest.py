"""Fixtures of the trainer tests, which run in .venv-trainer (`make pytest`).

`--confcutdir=tests/trainer` keeps pytest from loading tests/conftest.py, whose fixtures
need the core environment (FastAPI, the executor).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

VOCAB = 48

CPU_WITHOUT_BF16 = Path(__file__).parents[1] / "support" / "cpuinfo" / "epyc-avx2.txt"
CPU_WITH_AMX = Path(__file__).parents[1] / "support" / "cpuinfo" / "xeon-amx.txt"


@pytest.fixture(autouse=True)
def cpu_without_native_bfloat16(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU flags every trainer test sees: an AVX2-only CPU, where `auto` computes in
    float32, whatever the machine running the tests has (the rule's own tests pass
    flags explicitly). Exactness checks then mean the same on every machine."""
    from cobalt.shared.cpu_dtype import CPUINFO_VARIABLE

    # An environment variable, so torchrun ranks and scripts the tests start see it too.
    monkeypatch.setenv(CPUINFO_VARIABLE, str(CPU_WITHOUT_BF16))


@pytest.fixture
def tiny_model() -> Qwen2ForCausalLM:
    """A random 2-layer Qwen2 (hidden 64, one head, 48-token vocabulary); no downloads."""
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=1,
        num_key_value_heads=1,
        max_position_embeddings=128,
        tie_word_embeddings=False,
    )
    return Qwen2ForCausalLM(config).float()
