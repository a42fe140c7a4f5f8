"""A vLLM worker extension: weight reload that puts the old weights back when it fails,
and weights received over a broadcast from the trainer.

vLLM mixes this class into its workers (`--worker-extension-cls`, the mechanism RL
frameworks use for weight sync), so `collective_rpc("cobalt_reload_weights", ...)` runs
`cobalt_reload_weights` in every worker process, next to the model.

Why not plain `reload_weights`: vLLM 0.32 reloads layer by layer, moving each layer to the
meta device while its new tensors arrive. An exception part-way (a wrong shape, an
unreadable file) leaves some layers new, some on meta and the reload bookkeeping
half-done, and a second reload then fails as well. Here a failure is followed by
`_abandon_partial_reload` (give every unfinished layer its old tensors back, clear the
bookkeeping) and a reload of the previous checkpoint, which makes every layer old again.
The result names what happened instead of raising, so the caller gets vLLM's own error
message rather than "Worker failed with error ''".

This touches vLLM internals (`model_loader.reload.layerwise`), pinned to vllm 0.32.0; the
inference tests exercise it on every run.

`cobalt_receive_weights` is the other way in (`POST /v1/policy/broadcast`, behind
`COBALT_INFERENCE_WEIGHT_BROADCAST`): the worker joins the trainer's process group
(`cobalt.shared.weight_broadcast`) as rank 1 + its own rank and feeds the tensors, as they
land, to the same in-place reload (`reload_weights(weights_iterator=...)`), which maps
Hugging Face names onto vLLM's fused parameters and redoes the kernels' post-processing.
It cannot put old weights back (they were never on disk here): a failure after the first
tensor reports `restored: False`, and the server refuses generation.

`cobalt_load_policy` is the delta path's (`POST /v1/policy/weights` of a delta directory,
`cobalt.shared.weight_delta`): the worker rebuilds the version from a full checkpoint and
the deltas after it (or from the serving version's tensors it kept, applying only the new
delta) and feeds the tensors to the same in-place reload. It keeps those tensors on the
CPU (the served model's size again) until a full load or a broadcast replaces them.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["WeightReloadExtension"]


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip()
    if text:
        return f"{type(exc).__name__}: {text}"
    # Bare assertions carry no message: show where they fired.
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = (
        f" at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno} ({frame.line})" if frame else ""
    )
    return f"{type(exc).__name__}{where}"


def _abandon_partial_reload(model: Any) -> int:
    """Return every layer a failed reload left unfinished to its kernel tensors."""
    from vllm.model_executor.model_loader.reload import layerwise

    abandoned = 0
    for layer in model.modules():
        info = layerwise.get_layerwise_info(layer)
        if not info.can_load():
            continue
        if info.kernel_tensors is not None:
            layerwise._place_kernel_tensors(layer, info)
            abandoned += 1
        info.reset()
    layerwise.LOADING_LAYERS.clear()
    if hasattr(model, "_original_do_torchao_reload"):
        model._do_torchao_reload = model._original_do_torchao_reload
    return abandoned


@dataclass
class _KeptPolicy:
    """The serving version's tensors (Hugging Face names) after a delta load."""

    version: int
    tensors: dict[str, Any]


class WeightReloadExtension:
    """Methods added to vLLM's Worker; `self` is the worker."""

    _cobalt_policy: _KeptPolicy | None = None

    def cobalt_reload_weights(self, weights_path: str, fallback_path: str) -> dict[str, Any]:
        """Load `weights_path`; on failure restore `fallback_path`. Never raises for the load.

        Returns {"loaded": bool, "error": str | None, "restored": bool | None}.
        """
        worker: Any = self
        try:
            worker.reload_weights(weights_path=weights_path, is_checkpoint_format=True)
        except Exception as exc:  # any failure of vLLM's loader: report, then recover
            error = _error_text(exc)
        else:
            self._cobalt_policy = None  # the kept tensors are not what serves any more
            return {"loaded": True, "error": None, "restored": None}
        _abandon_partial_reload(worker.model_runner.get_model())
        kept = self._cobalt_policy
        try:
            if kept is not None:  # the serving weights came from deltas: no directory has them
                worker.reload_weights(
                    weights_iterator=iter(kept.tensors.items()), is_checkpoint_format=True
                )
            else:
                worker.reload_weights(weights_path=fallback_path, is_checkpoint_format=True)
        except Exception as exc:
            return {
                "loaded": False,
                "error": f"{error}; restoring {fallback_path} failed: {_error_text(exc)}",
                "restored": False,
            }
        return {"loaded": False, "error": error, "restored": True}

    def cobalt_receive_weights(self, request: dict[str, Any]) -> dict[str, Any]:
        """Receive and load the tensors of a `BroadcastWeightsRequest`. Never raises.

        Returns {"loaded": bool, "error": str | None, "restored": bool | None}: restored
        is True when it failed before any tensor reached the model (the old weights stand).
        """
        import torch

        from cobalt.shared.contracts.inference import BroadcastWeightsRequest
        from cobalt.shared.weight_broadcast import open_weight_group

        worker: Any = self
        taken = 0
        try:
            broadcast = BroadcastWeightsRequest.model_validate(request)
            group = open_weight_group(
                host=broadcast.master_address,
                port=broadcast.master_port,
                rank=1 + int(worker.rank),
                world_size=broadcast.world_size,
                backend=broadcast.backend,
                device=getattr(worker, "device", None) or torch.device("cpu"),
            )
        except Exception as exc:  # nothing was touched
            return {"loaded": False, "error": _error_text(exc), "restored": True}

        def arriving() -> Iterator[tuple[str, Any]]:
            nonlocal taken
            for name, tensor in group.receive(broadcast.tensors):
                taken += 1
                yield name, tensor

        try:
            # The same in-place reload as from a directory, fed as the tensors land: it
            # redoes the kernels' post-processing (repacked CPU weights, fused layouts).
            worker.reload_weights(weights_iterator=arriving(), is_checkpoint_format=True)
        except Exception as exc:  # reported to the controller, which decides
            self._cobalt_abandon_partial_reload()
            return {"loaded": False, "error": _error_text(exc), "restored": taken == 0}
        self._cobalt_policy = None
        return {"loaded": True, "error": None, "restored": None}

    def cobalt_load_policy(
        self, full_dir: str, full_version: int, deltas: list[str], fallback_path: str | None
    ) -> dict[str, Any]:
        """Load the policy of a full checkpoint plus `deltas` applied in order. Never raises.

        The tensors of the serving version are kept on this worker's CPU after a delta
        load, so the next delta applies to them instead of the chain from its start. A
        refused delta (a gap, a checksum mismatch: `cobalt.shared.weight_delta`) leaves
        the model untouched. A failure of vLLM's reload part-way is undone by applying
        the deltas again (XOR undoes itself) and reloading the serving version's tensors,
        or else by reloading `fallback_path` (the serving weights' directory, when they
        came from one).

        Returns {"loaded": bool, "error": str | None, "restored": bool | None}.
        """
        from cobalt.shared.weight_delta import (
            DeltaError,
            apply_delta,
            read_delta_manifest,
            read_full_weights,
            revert_delta,
        )

        worker: Any = self
        kept = self._cobalt_policy
        applied: list[str] = []
        try:
            manifests = [read_delta_manifest(Path(d)) for d in deltas]
            versions = [m.base_version for m in manifests[:1]] + [m.version for m in manifests]
            if kept is not None and kept.version in versions:
                tensors, version = kept.tensors, kept.version
                pending = deltas[versions.index(kept.version) :]
            else:
                self._cobalt_policy = kept = None  # memory for the full weights
                tensors, version, pending = read_full_weights(Path(full_dir)), full_version, deltas
            for delta in pending:
                version = apply_delta(tensors, Path(delta), base_version=version).version
                applied.append(delta)
        except (DeltaError, OSError) as exc:  # nothing reached the model
            if kept is not None:
                for delta in reversed(applied):
                    revert_delta(kept.tensors, Path(delta))
            else:
                self._cobalt_policy = None
            return {"loaded": False, "error": _error_text(exc), "restored": True}
        try:
            worker.reload_weights(weights_iterator=iter(tensors.items()), is_checkpoint_format=True)
        except Exception as exc:
            error = _error_text(exc)
        else:
            self._cobalt_policy = _KeptPolicy(version, tensors)
            return {"loaded": True, "error": None, "restored": None}
        _abandon_partial_reload(worker.model_runner.get_model())
        try:
            if kept is not None:
                for delta in reversed(applied):
                    revert_delta(kept.tensors, Path(delta))
                worker.reload_weights(
                    weights_iterator=iter(kept.tensors.items()), is_checkpoint_format=True
                )
            elif fallback_path is not None:
                worker.reload_weights(weights_path=fallback_path, is_checkpoint_format=True)
            else:
                return {
                    "loaded": False,
                    "error": f"{error}; no copy of the serving weights to restore",
                    "restored": False,
                }
        except Exception as exc:
            self._cobalt_policy = None
            return {
                "loaded": False,
                "error": f"{error}; restoring failed: {_error_text(exc)}",
                "restored": False,
            }
        return {"loaded": False, "error": error, "restored": True}

    def _cobalt_abandon_partial_reload(self) -> None:
        worker: Any = self
        _abandon_partial_reload(worker.model_runner.get_model())
