"""Step checkpoints: the weights inference loads (every step) and the full resume state
(every `save_every` steps, written in the background).

Layout under the checkpoint root, one directory per job:

    job-<id>/step-<k>/policy/            the Hugging Face model directory inference loads,
                                         written every step in the serving dtype (bfloat16
                                         for real models): config.json, model.safetensors
                                         (embeddings untied), the base model's tokenizer
                                         files and cobalt-policy.json {"version", "step", "job"}
                                         (a LoRA job: the peft adapter directory,
                                         adapter_config.json and adapter_model.safetensors,
                                         plus cobalt-policy.json)
    job-<id>/step-<k>/trainer-state.pt   the full resume state, every `save_every` steps:
                                         the float32 weights (a LoRA job: the adapter's
                                         alone), the optimizer state, step,
                                         policy version, the RNG states (torch, numpy,
                                         python) and the settings

Why two cadences: at 8B the served weights are 16 GB of bfloat16 but the resume state is
96 GB (float32 weights and two AdamW moments). The weights must reach inference every step;
the resume state only bounds how many steps a crash replays (exactly once still holds:
loop.py). The resume state does not stall training: the state dicts are gathered (a
collective) and copied to CPU in the step, then one background thread writes them while
the next step runs; the next resume state waits for the previous one to finish
(`ResumeStateWriter`).

Atomicity. A policy directory is written into `.step-<k>.partial` and renamed when whole;
a resume state into `step-<k>/.trainer-state.pt.partial` and renamed when whole. So a file
or directory with the final name is always complete, and a trainer killed mid-write leaves
the previous resume state usable: older steps are deleted only after a newer resume state
is complete. Kept: the newest `keep` policy directories (the inference service re-reads the
one it serves to check the next load), the newest complete resume state (with its step's
directory) and the one being written.

Delta weight sync (`full_weights_every` > 1, COBALT_TRAINER_FULL_WEIGHTS_EVERY): a step's
`policy/` holds, instead of the model files, the change since the previous version
(`cobalt.shared.weight_delta`: the XOR of the served bytes, compressed, with checksums),
and every `full_weights_every` versions the full weights again. The store keeps the last
published weights in the serving dtype on rank 0's CPU to encode against (the serving
model's size again: 16 GB at 8B), and writes full weights whenever it has none of the
version before (the first step of a process, a replay). Pruning keeps every step from the
newest full checkpoint on, so a replica can always rebuild the newest policy.

A policy directory that already exists for the same step and version is not written again:
a resumed trainer replays the steps after its resume state, and the version they publish
identifies the weights inference was given the first time (it may be serving them now).

Under torchrun (FSDP) the weights and optimizer state are sharded over the ranks. Saving
gathers full (unsharded) state dicts onto rank 0's CPU (`torch.distributed.checkpoint`'s
`get_*_state_dict`, a collective every rank joins), and rank 0 alone writes; loading reads
on rank 0 and scatters to the shards (`broadcast_from_rank0`). One format serves one
process and many: the optimizer state is keyed by parameter name, so a job checkpointed
on G GPUs resumes on any other count. The RNG states saved are rank 0's (a GRPO step
draws no random numbers: sampling happened in vLLM, dropout is off).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial as bind
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from pydantic_core import to_jsonable_python
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from cobalt.shared.checkpoints import POLICY_FILE, read_policy_version, write_policy_version
from cobalt.shared.weight_delta import DELTA_MANIFEST, read_tensor_names, write_delta
from cobalt.trainer.distributed import rank_and_size
from cobalt.trainer.lora import is_adapter_dir
from cobalt.trainer.volume import CheckpointVolumeError, write_patiently

__all__ = [
    "POLICY_DIR",
    "STATE_FILE",
    "Checkpoint",
    "CheckpointStore",
    "ResumeStateWriter",
    "job_checkpoint_root",
    "latest_checkpoint",
    "latest_weights",
    "load_checkpoint",
    "partial_of",
    "save_checkpoint",
]

logger = logging.getLogger(__name__)

POLICY_DIR = "policy"
STATE_FILE = "trainer-state.pt"
_PARTIAL_STATE = f".{STATE_FILE}.partial"
_STEP = re.compile(r"^step-(\d+)$")
_WEIGHT_FILES = re.compile(r"(\.safetensors|\.bin|\.pt|\.index\.json)$|^config\.json$")
"""Files of the base model directory that the checkpoint writes itself."""
_FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One step's directory on disk: its policy weights, perhaps its resume state."""

    path: Path
    step: int
    policy_version: int

    @property
    def policy_dir(self) -> Path:
        """The model directory the inference service loads."""
        return self.path / POLICY_DIR

    @property
    def state_file(self) -> Path:
        """The full resume state (present every `save_every` steps)."""
        return self.path / STATE_FILE


def partial_of(path: Path) -> Callable[[], None]:
    """What deletes a failed write's partial output at `path` (a file or a directory),
    ignoring errors: on a read-only volume it cannot go, and the next try replaces it."""

    def discard() -> None:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)

    return discard


def job_checkpoint_root(root: Path, job_id: int) -> Path:
    return root / f"job-{job_id}"


def _rng_state() -> dict[str, Any]:
    return {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }


def _restore_rng(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def _steps(job_root: Path, *, with_state: bool) -> list[int]:
    """Steps with a complete policy directory (and, `with_state`, a complete resume state)."""
    steps = []
    for entry in job_root.iterdir() if job_root.is_dir() else []:
        match = _STEP.match(entry.name)
        if not match or not (entry / POLICY_DIR / POLICY_FILE).is_file():
            continue
        if with_state and not (entry / STATE_FILE).is_file():
            continue
        steps.append(int(match.group(1)))
    return sorted(steps)


def _checkpoint_of(job_root: Path, step: int) -> Checkpoint:
    path = job_root / f"step-{step}"
    # The version is in the small policy file; the resume state (GBs for a real model) is
    # read once, by load_checkpoint.
    version = read_policy_version(path / POLICY_DIR)
    if version is None:
        raise ValueError(f"{path / POLICY_DIR} has no policy version file")
    return Checkpoint(path, step, version)


def latest_checkpoint(root: Path, job_id: int) -> Checkpoint | None:
    """The newest step with a complete resume state (where a resume starts), or None."""
    job_root = job_checkpoint_root(root, job_id)
    steps = _steps(job_root, with_state=True)
    return _checkpoint_of(job_root, steps[-1]) if steps else None


def latest_weights(root: Path, job_id: int) -> Checkpoint | None:
    """The newest step whose policy directory is complete (the newest weights published,
    or about to be), or None."""
    job_root = job_checkpoint_root(root, job_id)
    steps = _steps(job_root, with_state=False)
    return _checkpoint_of(job_root, steps[-1]) if steps else None


class ResumeStateWriter:
    """Writes full resume states on a background thread, one at a time.

    `start` takes CPU copies the caller will not touch again and returns at once; the
    previous write is waited for first, so at most one resume state is in flight and they
    land in step order. A write that failed raises from the next `start` or `wait`.
    """

    def __init__(self, job_root: Path, *, keep: int, outage_s: float = 300.0) -> None:
        self.job_root = job_root
        self.keep = keep
        self.outage_s = outage_s
        """How long a write waits out a volume that refuses it (volume.py)."""
        self.lock = threading.Lock()
        """Held while deleting old steps: the writer thread and the step both prune."""
        self.writing: int | None = None
        """The step whose resume state is being written (never deleted meanwhile)."""
        self.last_write_s: float | None = None
        """Seconds the last completed write took on the thread (for the step metrics)."""
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self, step: int, state: dict[str, Any]) -> None:
        self.wait()
        with self.lock:
            self.writing = step
        self._thread = threading.Thread(
            target=self._write, args=(step, state), name=f"resume-state-{step}", daemon=False
        )
        self._thread.start()

    def wait(self) -> None:
        """Block until the write in flight (if any) is on disk; raise its error."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            if isinstance(error, CheckpointVolumeError):  # already says what and why
                raise error
            raise RuntimeError(f"writing a resume state failed: {error}") from error

    def _write(self, step: int, state: dict[str, Any]) -> None:
        began = time.perf_counter()
        directory = self.job_root / f"step-{step}"
        partial = directory / _PARTIAL_STATE

        def write() -> None:
            torch.save(state, partial)
            os.replace(partial, directory / STATE_FILE)

        try:
            write_patiently(
                write,
                directory=self.job_root,
                outage_s=self.outage_s,
                what=f"step {step}'s resume state",
                clean_up=partial_of(partial),
            )
            self.last_write_s = time.perf_counter() - began
        except BaseException as exc:  # handed to the step that waits next
            self._error = exc
        finally:
            with self.lock:
                self.writing = None
            self.prune()

    def prune(self) -> None:
        """Delete the steps nothing needs: see the module docstring for what is kept."""
        with self.lock:
            weights = _steps(self.job_root, with_state=False)
            states = _steps(self.job_root, with_state=True)
            needed = set(weights[-self.keep :]) | set(states[-1:])
            full = [s for s in weights if not self._is_delta(s)]
            if full:  # a replica rebuilds the newest policy from these
                needed |= {s for s in weights if s >= full[-1]}
            if self.writing is not None:
                needed.add(self.writing)
            for old in weights:
                if old not in needed:
                    shutil.rmtree(self.job_root / f"step-{old}", ignore_errors=True)

    def _is_delta(self, step: int) -> bool:
        return (self.job_root / f"step-{step}" / POLICY_DIR / DELTA_MANIFEST).is_file()


@dataclass(frozen=True, slots=True)
class _Published:
    version: int
    full_version: int
    """The full checkpoint the chain of deltas up to `version` starts from."""
    tensors: dict[str, torch.Tensor]


@dataclass
class CheckpointStore:
    """One job's checkpoints: `save_weights` every step, `save_state` every `save_every`."""

    root: Path
    job_id: int
    base_model_dir: Path
    keep: int = 2
    serve_dtype: torch.dtype | None = None
    """The dtype of the served weights (the base model's, e.g. bfloat16); None: as trained."""
    full_weights_every: int = 1
    """Write the full weights every this many versions and a delta against the previous
    version otherwise (see the module docstring); 1: full weights every step."""
    outage_s: float = 300.0
    """How long each write waits out a volume that refuses it (full, read-only: volume.py)
    before it raises `CheckpointVolumeError`."""

    def __post_init__(self) -> None:
        if self.keep < 2:
            raise ValueError("keep at least 2 checkpoints: the serving one must outlive the next")
        self.job_root = job_checkpoint_root(self.root, self.job_id)
        self.writer = ResumeStateWriter(self.job_root, keep=self.keep, outage_s=self.outage_s)
        self._published: _Published | None = None
        """Rank 0: the last weights written, in the serving dtype (deltas are made against
        them); kept only with `full_weights_every` > 1."""
        self._staging: Any = None
        """The CPU copy of the last resume state, reused by the next one: copying into
        memory already touched is about twice as fast as into fresh pages."""

    def save_weights(self, *, step: int, policy_version: int, model: torch.nn.Module) -> Checkpoint:
        """Write step `step`'s policy directory (every rank calls this; rank 0 writes).

        Kept as it is when the same step and version were written before (a replay after a
        resume: see the module docstring).
        """
        final = self.job_root / f"step-{step}"
        weights = _trained_state(model)  # a collective under FSDP
        rank, world = rank_and_size()
        if rank == 0:
            written = final.is_dir() and step in _steps(self.job_root, with_state=False)
            if written and read_policy_version(final / POLICY_DIR) == policy_version:
                logger.info("step %d: policy directory of version %d kept", step, policy_version)
                self._published = None  # its weights are not these: the next write is full
            else:
                write_patiently(
                    bind(self._write_policy, final, step, policy_version, model, weights),
                    directory=self.job_root,
                    outage_s=self.outage_s,
                    what=f"step {step}'s weights",
                    clean_up=partial_of(self.job_root / f".step-{step}.partial"),
                )
            self.writer.prune()
        if world > 1:
            dist.barrier()  # no rank goes on (and no inference load starts) before it is whole
        return Checkpoint(final, step, policy_version)

    def _write_policy(
        self,
        final: Path,
        step: int,
        policy_version: int,
        model: torch.nn.Module,
        weights: dict[str, Any],
    ) -> None:
        self.job_root.mkdir(parents=True, exist_ok=True)
        partial = self.job_root / f".step-{step}.partial"
        if partial.exists():
            shutil.rmtree(partial)
        policy = partial / POLICY_DIR
        dtype = self.serve_dtype
        converted = dtype is not None and any(
            t.is_floating_point() and t.dtype != dtype for t in weights.values()
        )
        served = weights
        if converted:
            served = {k: t.to(dtype) if t.is_floating_point() else t for k, t in weights.items()}
        base = self._published
        lora = any(not p.requires_grad for p in model.parameters())
        if (
            self.full_weights_every > 1
            and not lora  # an adapter is megabytes: always written whole
            and base is not None
            and base.version == policy_version - 1
            and policy_version - base.full_version < self.full_weights_every
        ):
            current = {name: served[name] for name in base.tensors}
            manifest = write_delta(
                policy,
                previous=base.tensors,
                current=current,
                version=policy_version,
                base_version=base.version,
                full_version=base.full_version,
            )
            full_version = base.full_version
            share = manifest.changed / max(manifest.values, 1)
            logger.info(
                "step %d: version %d written as a delta against %d (%.2f%% of values changed)",
                step,
                policy_version,
                base.version,
                100 * share,
            )
            kept = set(base.tensors)
        else:
            self._write_full(policy, model, served, converted=converted)
            full_version = policy_version
            kept = set(read_tensor_names(policy))  # what the replica reads back
        write_policy_version(policy, policy_version, step=step, job=self.job_id)
        if final.exists():  # an older write of this step (another version): replace its weights
            stale = self.job_root / f".step-{step}.replaced"
            shutil.rmtree(stale, ignore_errors=True)
            final.rename(stale)
            shutil.rmtree(stale)
        partial.rename(final)
        self._published = None
        if self.full_weights_every > 1 and not lora and kept <= served.keys():
            self._published = _Published(
                policy_version,
                full_version,
                {k: served[k] if converted else served[k].detach().clone() for k in kept},
            )

    def _write_full(
        self, policy: Path, model: torch.nn.Module, served: dict[str, Any], *, converted: bool
    ) -> None:
        # The gathered dict, not the (possibly sharded) module's own state. A LoRA job's
        # model is a peft model: it writes the adapter directory from the adapter's tensors.
        # A copy of the dict: save_pretrained empties the one it is given as it writes.
        model.save_pretrained(policy, state_dict=dict(served), safe_serialization=True)
        adapter = is_adapter_dir(policy)
        if converted and not adapter:
            config = json.loads((policy / "config.json").read_text(encoding="utf-8"))
            config["dtype"] = str(self.serve_dtype).removeprefix("torch.")  # what the file holds
            (policy / "config.json").write_text(
                json.dumps(config, indent=2) + "\n", encoding="utf-8"
            )
        for item in Path(self.base_model_dir).iterdir():  # tokenizer, chat template, ...
            if (
                not adapter  # vLLM takes an adapter's tokenizer from the base model
                and item.is_file()
                and not _WEIGHT_FILES.search(item.name)
                and not (policy / item.name).exists()
            ):
                shutil.copy2(item, policy / item.name)

    def rewrite_full(self, checkpoint: Checkpoint, model: torch.nn.Module) -> Checkpoint:
        """Write `checkpoint`'s policy directory again as full weights (rank 0), from the
        weights kept for the next delta: what the trainer does when inference refused the
        delta (a replica that cannot rebuild the chain loads this instead)."""
        base = self._published
        if base is None or base.version != checkpoint.policy_version:
            raise ValueError(
                f"the weights of version {checkpoint.policy_version} are not kept; "
                "cannot write them whole again"
            )
        partial = self.job_root / f".step-{checkpoint.step}.full"

        def write() -> None:
            shutil.rmtree(partial, ignore_errors=True)
            converted = self.serve_dtype is not None
            self._write_full(partial / POLICY_DIR, model, base.tensors, converted=converted)
            write_policy_version(
                partial / POLICY_DIR,
                checkpoint.policy_version,
                step=checkpoint.step,
                job=self.job_id,
            )

        write_patiently(
            write,
            directory=self.job_root,
            outage_s=self.outage_s,
            what=f"step {checkpoint.step}'s full weights",
            clean_up=partial_of(partial),
        )
        stale = self.job_root / f".step-{checkpoint.step}.replaced"
        shutil.rmtree(stale, ignore_errors=True)
        checkpoint.path.rename(stale)
        partial.rename(checkpoint.path)
        shutil.rmtree(stale)
        self._published = _Published(base.version, base.version, base.tensors)
        return checkpoint

    def save_state(
        self,
        checkpoint: Checkpoint,
        *,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        settings: dict[str, Any],
    ) -> None:
        """Start writing the full resume state of `checkpoint`'s step; returns before it is
        on disk (`wait` for that). Every rank calls this: the gathering is a collective."""
        weights = _trained_state(model)
        optimizer_state = get_optimizer_state_dict(model, optimizer, options=_FULL)
        rank, world = rank_and_size()
        if rank != 0:
            return
        if world == 1:  # not gathered: these are the live tensors the next step updates
            self.writer.wait()  # the staging copy below is what it may still be writing
            weights, optimizer_state = _stage((weights, optimizer_state), self._staging)
            self._staging = (weights, optimizer_state)
        state = {
            "step": checkpoint.step,
            "policy_version": checkpoint.policy_version,
            "optimizer": optimizer_state,
            "rng": _rng_state(),
            "settings": to_jsonable_python(settings),  # plain data: no class is pickled
            "master_weights": weights,
        }
        self.writer.start(checkpoint.step, state)

    def wait(self) -> None:
        """Until the resume state in flight is on disk (rank 0; a no-op elsewhere)."""
        self.writer.wait()


def _trained(model: torch.nn.Module, weights: dict[str, Any]) -> dict[str, Any]:
    """The state that training changes: every tensor, but a LoRA job's frozen base (the
    job's model directory has it) is left out, so its files hold the adapter alone."""
    frozen = {name for name, p in model.named_parameters() if not p.requires_grad}
    if not frozen:
        return weights
    return {name: tensor for name, tensor in weights.items() if name not in frozen}


def _trained_state(model: torch.nn.Module) -> dict[str, Any]:
    """`_trained` of the full state dict (a collective under FSDP). In one process a LoRA
    job reads its adapter's parameters directly: gathering the whole model's state dict
    first would copy the frozen base, hundreds of times the adapter, every step."""
    _, world = rank_and_size()
    frozen = any(not p.requires_grad for p in model.parameters())
    if world == 1 and frozen:
        return {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}
    return _trained(model, get_model_state_dict(model, options=_FULL))


def _stage(tree: Any, staging: Any) -> Any:
    """A CPU copy of a state dict sharing no storage with the live tensors, written into
    `staging` (the previous copy) wherever it has the same structure, shapes and dtypes."""
    if isinstance(tree, torch.Tensor):
        fits = (
            isinstance(staging, torch.Tensor)
            and staging.shape == tree.shape
            and staging.dtype == tree.dtype
        )
        return staging.copy_(tree.detach()) if fits else tree.detach().to("cpu", copy=True)
    if isinstance(tree, dict):
        old = staging if isinstance(staging, dict) else {}
        return {key: _stage(value, old.get(key)) for key, value in tree.items()}
    if isinstance(tree, list | tuple):
        same = isinstance(staging, type(tree)) and len(staging) == len(tree)
        return type(tree)(_stage(v, staging[i] if same else None) for i, v in enumerate(tree))
    return tree


def save_checkpoint(
    root: Path,
    *,
    job_id: int,
    step: int,
    policy_version: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    base_model_dir: Path,
    settings: dict[str, Any],
    keep: int = 2,
    serve_dtype: torch.dtype | None = None,
) -> Checkpoint:
    """Write step `step`'s policy directory and its full resume state, and wait for both.

    `keep` is at least 2: the inference service serves the previous step's directory and
    reads it again to check the next load against, so it must outlive the next write.
    `policy_version` is the version the saved weights will be served as. With
    `serve_dtype` (the base model's, e.g. bfloat16) the policy directory holds the weights
    in that dtype, as the inference service's pre-checks require; the resume state always
    holds the trainer's own full-precision weights, so a resume is exact.
    """
    store = CheckpointStore(
        root, job_id, base_model_dir=base_model_dir, keep=keep, serve_dtype=serve_dtype
    )
    saved = store.save_weights(step=step, policy_version=policy_version, model=model)
    store.save_state(saved, model=model, optimizer=optimizer, settings=settings)
    store.wait()
    return saved


def load_checkpoint(
    checkpoint: Checkpoint, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> dict[str, Any]:
    """Put the checkpoint's weights, optimizer and RNG states back; returns its state
    (without the weights; under torchrun, every rank gets rank 0's step and version).

    The full-precision weights of the resume state are copied into the live model, so the
    model object and the optimizer's references to its parameters stay the same. Every
    rank calls this; only rank 0 reads the file.
    """
    rank, world = rank_and_size()
    weights: dict[str, torch.Tensor] = {}
    optimizer_state: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    if rank == 0:
        state, weights = _read(checkpoint)
        optimizer_state = state.pop("optimizer")
        summary = state
        expected = set(_trained(model, get_model_state_dict(model))) if world == 1 else None
        if expected is not None:
            missing = [n for n in expected - weights.keys() if not n.endswith("inv_freq")]
            if missing or weights.keys() - expected:
                raise ValueError(
                    f"{checkpoint.state_file} does not fit the model: missing "
                    f"{sorted(missing)[:5]}, unexpected {sorted(weights.keys() - expected)[:5]}"
                )
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=world > 1, strict=False)
    set_model_state_dict(model, weights, options=options)
    set_optimizer_state_dict(model, optimizer, optimizer_state, options=options)
    if world > 1:
        shared = [summary]
        dist.broadcast_object_list(shared, src=0)
        summary = shared[0]
    if rank == 0:
        _restore_rng(summary.pop("rng"))
    else:
        summary.pop("rng", None)
    return summary


def _read(checkpoint: Checkpoint) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """The resume state and its full-precision weights.

    Resume states written before the weights were always kept in them hold None there
    when the served weights were not converted: those come from the policy directory.
    """
    from safetensors.torch import load_file

    state: dict[str, Any] = torch.load(
        checkpoint.state_file, map_location="cpu", weights_only=False
    )
    weights: dict[str, torch.Tensor] = state.pop("master_weights", None) or {}
    if not weights:
        for file in sorted(checkpoint.policy_dir.glob("*.safetensors")):
            weights.update(load_file(file))
    return state, weights
