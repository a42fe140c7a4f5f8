"""Delta weight sync: a policy version written as what changed since the previous one.

A training step at RL learning rates moves every float32 master weight a little, but the
served weights are rounded to bfloat16, and most of them round to the same value as
before (docs/benchmarks.md measures the share). So instead of the whole model every step,
the trainer writes, against the previous published version, the XOR of each tensor's
bytes (zero wherever a value did not change) compressed with zlib; every
`COBALT_TRAINER_FULL_WEIGHTS_EVERY` versions it writes the full weights again, which
bounds how many deltas a replica that joins late must apply.

A delta directory (a step's `policy/`, in place of the model files) holds

    cobalt-policy.json     {"version", "step", "job"}, as a full checkpoint
    cobalt-delta.json      the manifest: format, version, base_version (the version it
                           applies to), full_version (the full checkpoint its chain starts
                           from), payload_sha256 (of cobalt-delta.bin), and per tensor its
                           dtype, shape, place in the payload, how many values changed and
                           the crc32 of the resulting tensor's bytes
    cobalt-delta.bin       the compressed XORs, one after the other

The newest policy is the newest full checkpoint plus the deltas after it, in version
order, each with base_version equal to the version before (`newest_policy`). Applying
(`apply_delta`) refuses, with a `DeltaError` that says which, a delta for another base
(a gap), a payload whose sha256 differs (a corrupted or truncated file) and a result
whose crc32 differs (applied to other weights than it was made against); a refused
delta leaves the tensors as they were (XOR undoes itself).

The encoding is of tensors, not files: the broadcast path can send the same payload
(`encode_tensor` output) instead of whole tensors when both ends hold the previous
version (docs/inference.md). torch and numpy are imported lazily: resolving a chain and
checking its files needs neither (the control middleware's environment has no torch).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cobalt.shared.checkpoints import POLICY_FILE, read_policy_version

if TYPE_CHECKING:
    from cobalt.shared.weight_broadcast import WeightGroup

__all__ = [
    "DELTA_FILE",
    "DELTA_FORMAT",
    "DELTA_MANIFEST",
    "DeltaError",
    "DeltaManifest",
    "PolicyChain",
    "TensorDelta",
    "apply_delta",
    "apply_delta_payload",
    "broadcast_delta",
    "encode_delta",
    "encode_tensor",
    "is_delta_dir",
    "manifest_json",
    "newest_full_checkpoint",
    "newest_policy",
    "parse_manifest",
    "read_delta_manifest",
    "read_full_weights",
    "read_tensor_names",
    "receive_delta",
    "revert_delta",
    "tensor_crc32",
    "write_delta",
]

DELTA_MANIFEST = "cobalt-delta.json"
DELTA_FILE = "cobalt-delta.bin"
DELTA_FORMAT = "xor-zlib/1"
_ZLIB_LEVEL = 1
"""zlib's fastest level: the XORs are mostly zero bytes, which every level compresses
alike; higher levels only cost time (docs/benchmarks.md)."""
_STEP = re.compile(r"^step-(\d+)$")
_THREADS = min(8, os.cpu_count() or 1)
"""zlib and torch release the GIL, so tensors are encoded and checked in parallel."""


class DeltaError(ValueError):
    """A delta that cannot be applied: a gap in the chain, a checksum mismatch, a file
    missing or unreadable, or tensors that do not fit."""


@dataclass(frozen=True, slots=True)
class TensorDelta:
    name: str
    dtype: str
    shape: list[int]
    offset: int
    """Where its compressed XOR starts in cobalt-delta.bin."""
    length: int
    changed: int
    """How many values differ from the base version's."""
    crc32: int
    """Of the resulting tensor's bytes."""


@dataclass(frozen=True, slots=True)
class DeltaManifest:
    version: int
    base_version: int
    full_version: int
    payload_sha256: str
    tensors: list[TensorDelta]
    format: str = DELTA_FORMAT

    @property
    def changed(self) -> int:
        return sum(t.changed for t in self.tensors)

    @property
    def values(self) -> int:
        total = 0
        for tensor in self.tensors:
            count = 1
            for dim in tensor.shape:
                count *= dim
            total += count
        return total


@dataclass(frozen=True, slots=True)
class PolicyChain:
    """The newest policy of a job: a full checkpoint and the deltas after it, in order."""

    full_dir: Path
    full_version: int
    deltas: tuple[Path, ...]
    version: int


def is_delta_dir(directory: Path) -> bool:
    return (Path(directory) / DELTA_MANIFEST).is_file()


def read_delta_manifest(directory: Path) -> DeltaManifest:
    path = Path(directory) / DELTA_MANIFEST
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise DeltaError(f"{directory}: no {DELTA_MANIFEST} (the delta is missing)") from exc
    except OSError as exc:
        raise DeltaError(f"{path}: not a delta manifest ({exc!r})") from exc
    return parse_manifest(text, str(path))


def _bytes_of(tensor: Any) -> Any:
    """The tensor's bytes as a numpy uint8 array (no copy for a contiguous CPU tensor)."""
    import torch

    return tensor.detach().contiguous().view(torch.uint8).reshape(-1).numpy()


def _int_view(tensor: Any) -> Any:
    """The tensor's elements as integers of the same width (XOR works on those)."""
    import torch

    widths = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return tensor.view(widths[tensor.element_size()]).reshape(-1)


def tensor_crc32(tensor: Any) -> int:
    return zlib.crc32(_bytes_of(tensor))


def encode_tensor(previous: Any, current: Any) -> tuple[bytes, int]:
    """`current` against `previous` (same shape and dtype): the zlib-compressed XOR of
    their bytes, and how many values differ."""
    if previous.shape != current.shape or previous.dtype != current.dtype:
        raise DeltaError(
            f"cannot encode {list(current.shape)} {current.dtype} against "
            f"{list(previous.shape)} {previous.dtype}"
        )
    xor = _int_view(previous.contiguous()) ^ _int_view(current.contiguous())
    changed = int(xor.count_nonzero())
    return zlib.compress(_bytes_of(xor), _ZLIB_LEVEL), changed


def _encoded_tensors(
    previous: Mapping[str, Any], current: Mapping[str, Any]
) -> Iterator[tuple[TensorDelta, bytes]]:
    """Each tensor of `current` XOR-encoded against `previous`, in order, with its manifest
    entry; encoded in a thread pool (zlib and torch release the GIL) and yielded one at a
    time, so that the disk path streams them and never holds the whole payload."""
    if previous.keys() != current.keys():
        missing, extra = previous.keys() - current.keys(), current.keys() - previous.keys()
        raise DeltaError(f"tensors differ: missing {sorted(missing)[:5]}, new {sorted(extra)[:5]}")
    names = list(current)

    def encode(name: str) -> tuple[bytes, int, int]:
        blob, changed = encode_tensor(previous[name], current[name])
        return blob, changed, tensor_crc32(current[name])

    offset = 0
    with ThreadPoolExecutor(_THREADS) as pool:
        for name, (blob, changed, crc) in zip(names, pool.map(encode, names), strict=True):
            tensor = current[name]
            entry = TensorDelta(
                name=name,
                dtype=str(tensor.dtype).removeprefix("torch."),
                shape=list(tensor.shape),
                offset=offset,
                length=len(blob),
                changed=changed,
                crc32=crc,
            )
            offset += len(blob)
            yield entry, blob


def encode_delta(
    *,
    previous: Mapping[str, Any],
    current: Mapping[str, Any],
    version: int,
    base_version: int,
    full_version: int,
) -> tuple[DeltaManifest, bytes]:
    """`current` as a delta against `previous` (the tensors of `base_version`): its
    manifest and payload in memory, as a broadcast sends them (`write_delta` writes the
    same bytes to disk)."""
    entries: list[TensorDelta] = []
    blobs: list[bytes] = []
    for entry, blob in _encoded_tensors(previous, current):
        entries.append(entry)
        blobs.append(blob)
    payload = b"".join(blobs)
    manifest = DeltaManifest(
        version=version,
        base_version=base_version,
        full_version=full_version,
        payload_sha256=hashlib.sha256(payload).hexdigest(),
        tensors=entries,
    )
    return manifest, payload


def manifest_json(manifest: DeltaManifest) -> str:
    return json.dumps(asdict(manifest))


def parse_manifest(text: str, where: str) -> DeltaManifest:
    """A manifest from its JSON (`where`: the file or sender it came from, for errors)."""
    try:
        raw = json.loads(text)
        if raw.get("format") != DELTA_FORMAT:
            raise DeltaError(f"{where}: format {raw.get('format')!r}, expected {DELTA_FORMAT!r}")
        tensors = [TensorDelta(**entry) for entry in raw.pop("tensors")]
        return DeltaManifest(tensors=tensors, **raw)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        if isinstance(exc, DeltaError):
            raise
        raise DeltaError(f"{where}: not a delta manifest ({exc!r})") from exc


def write_delta(
    directory: Path,
    *,
    previous: Mapping[str, Any],
    current: Mapping[str, Any],
    version: int,
    base_version: int,
    full_version: int,
) -> DeltaManifest:
    """Write `current` as a delta against `previous` (the tensors of `base_version`) into
    `directory` (created; the caller adds the policy file and renames it into place)."""
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    entries: list[TensorDelta] = []
    with (directory / DELTA_FILE).open("wb") as out:
        for entry, blob in _encoded_tensors(previous, current):
            out.write(blob)
            digest.update(blob)
            entries.append(entry)
    manifest = DeltaManifest(
        version=version,
        base_version=base_version,
        full_version=full_version,
        payload_sha256=digest.hexdigest(),
        tensors=entries,
    )
    (directory / DELTA_MANIFEST).write_text(manifest_json(manifest) + "\n", encoding="utf-8")
    return manifest


def _payload(directory: Path, manifest: DeltaManifest) -> bytes:
    path = Path(directory) / DELTA_FILE
    try:
        payload = path.read_bytes()
    except OSError as exc:
        raise DeltaError(
            f"{path}: cannot read the delta of version {manifest.version} ({exc})"
        ) from exc
    _check_payload(payload, manifest, str(path))
    return payload


def _check_payload(payload: bytes, manifest: DeltaManifest, where: str) -> None:
    if hashlib.sha256(payload).hexdigest() != manifest.payload_sha256:
        raise DeltaError(
            f"{where}: checksum mismatch (sha256 differs from the manifest's): the delta of "
            f"version {manifest.version} is corrupted or truncated"
        )


def apply_delta(
    tensors: MutableMapping[str, Any], directory: Path, *, base_version: int
) -> DeltaManifest:
    """Turn `tensors` (the weights of `base_version`) into the delta's version, in place.

    Raises:
        DeltaError: the delta is for another base version, its payload's checksum
            differs, a tensor does not fit, or a result's crc32 differs; `tensors` are
            then as they were.
    """
    manifest = read_delta_manifest(directory)
    _check_base(manifest, base_version, str(directory))
    payload = _payload(directory, manifest)
    return apply_delta_payload(tensors, manifest, payload, base_version=base_version)


def _check_base(manifest: DeltaManifest, base_version: int, where: str) -> None:
    if manifest.base_version != base_version:
        raise DeltaError(
            f"gap: the delta of version {manifest.version} ({where}) applies to version "
            f"{manifest.base_version}, the weights at hand are version {base_version}"
        )


def apply_delta_payload(
    tensors: MutableMapping[str, Any],
    manifest: DeltaManifest,
    payload: bytes,
    *,
    base_version: int,
    where: str = "the delta",
) -> DeltaManifest:
    """`apply_delta` of a manifest and payload at hand (received by broadcast): the same
    checks (gap, sha256, fit, crc32) and the same guarantee that a refused delta leaves
    `tensors` as they were."""
    _check_base(manifest, base_version, where)
    _check_payload(payload, manifest, where)
    names = {entry.name for entry in manifest.tensors}
    if names != tensors.keys():
        raise DeltaError(
            f"the delta of version {manifest.version} does not fit the weights: missing "
            f"{sorted(tensors.keys() - names)[:5]}, unexpected {sorted(names - tensors.keys())[:5]}"
        )
    for entry in manifest.tensors:
        tensor = tensors[entry.name]
        if list(tensor.shape) != entry.shape or str(tensor.dtype) != f"torch.{entry.dtype}":
            raise DeltaError(
                f"{entry.name}: delta is {entry.shape} {entry.dtype}, weights are "
                f"{list(tensor.shape)} {tensor.dtype}"
            )

    def xor(entry: TensorDelta) -> bool | None:
        """XOR one tensor with its delta: True when the result has the manifest's crc,
        None when the blob does not decode to the tensor's size (the tensor untouched)."""
        try:
            _xor_entry(tensors, payload, entry)
        except (zlib.error, DeltaError):
            return None
        return tensor_crc32(tensors[entry.name]) == entry.crc32

    with ThreadPoolExecutor(_THREADS) as pool:
        results = list(pool.map(xor, manifest.tensors))
    failed = [e.name for e, ok in zip(manifest.tensors, results, strict=True) if ok is not True]
    if failed:
        touched = [e for e, ok in zip(manifest.tensors, results, strict=True) if ok is not None]
        with ThreadPoolExecutor(_THREADS) as pool:  # XOR again: back to the base version
            list(pool.map(lambda e: _xor_entry(tensors, payload, e), touched))
        raise DeltaError(
            f"checksum mismatch: after the delta of version {manifest.version}, "
            f"{len(failed)} tensor(s) differ from the trainer's ({', '.join(failed[:3])}): "
            f"the weights at hand were not version {base_version}"
        )
    return manifest


def broadcast_delta(group: WeightGroup, manifest: DeltaManifest, payload: bytes) -> int:
    """Send a delta over a weight group (rank 0): its manifest and payload, the same bytes
    as a delta directory's files; returns the bytes sent."""
    return group.send_bytes(manifest_json(manifest).encode(), payload)


def receive_delta(
    group: WeightGroup, tensors: MutableMapping[str, Any], *, base_version: int
) -> DeltaManifest:
    """Receive a delta from rank 0 and apply it to `tensors` (the weights of
    `base_version`) with `apply_delta_payload`'s checks.

    Raises:
        DeltaError: a gap or a checksum mismatch; `tensors` are then as they were.
    """
    text, payload = group.receive_bytes(2)
    where = f"the delta broadcast to rank {group.rank}"
    manifest = parse_manifest(text.decode("utf-8"), where)
    return apply_delta_payload(tensors, manifest, payload, base_version=base_version, where=where)


def _xor_entry(tensors: MutableMapping[str, Any], payload: bytes, entry: TensorDelta) -> None:
    import torch

    raw = bytearray(zlib.decompress(payload[entry.offset : entry.offset + entry.length]))
    target = tensors[entry.name]
    if len(raw) != target.numel() * target.element_size():
        raise DeltaError(f"{entry.name}: the delta has {len(raw)} bytes, not the tensor's")
    change = torch.frombuffer(raw, dtype=torch.uint8).view(target.dtype)
    _int_view(target).bitwise_xor_(_int_view(change))


def revert_delta(tensors: MutableMapping[str, Any], directory: Path) -> None:
    """Undo `apply_delta` of `directory` on `tensors` (back to its base version: XOR
    undoes itself)."""
    manifest = read_delta_manifest(directory)
    payload = _payload(directory, manifest)
    with ThreadPoolExecutor(_THREADS) as pool:
        list(pool.map(lambda e: _xor_entry(tensors, payload, e), manifest.tensors))


def read_full_weights(model_dir: Path) -> dict[str, Any]:
    """Every tensor of a full checkpoint directory (its *.safetensors files), on the CPU."""
    from safetensors.torch import load_file

    tensors: dict[str, Any] = {}
    for file in sorted(Path(model_dir).glob("*.safetensors")):
        tensors.update(load_file(file))
    if not tensors:
        raise DeltaError(f"{model_dir}: no *.safetensors files (not a full checkpoint)")
    return tensors


def read_tensor_names(model_dir: Path) -> list[str]:
    """The tensor names of a full checkpoint directory, from its safetensors headers."""
    names: list[str] = []
    for file in sorted(Path(model_dir).glob("*.safetensors")):
        with file.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
        names.extend(name for name in header if name != "__metadata__")
    return names


def _published(job_root: Path) -> Iterable[tuple[int, Path]]:
    """(version, policy directory) of every complete step directory of a job."""
    for entry in job_root.iterdir() if job_root.is_dir() else []:
        policy = entry / "policy"
        if _STEP.match(entry.name) and (policy / POLICY_FILE).is_file():
            try:
                version = read_policy_version(policy)
            except ValueError:
                continue
            if version is not None:
                yield version, policy


def newest_full_checkpoint(job_root: Path) -> tuple[int, Path] | None:
    """(version, directory) of the job's newest full checkpoint, or None."""
    full = [(v, p) for v, p in _published(Path(job_root)) if not is_delta_dir(p)]
    full = [(v, p) for v, p in full if any(p.glob("*.safetensors"))]
    return max(full) if full else None


def newest_policy(job_root: Path, *, upto: int | None = None) -> PolicyChain:
    """The job's newest policy (at most version `upto`): its newest full checkpoint and
    the deltas after it, checked to form an unbroken chain (their manifests only; the
    payloads are checked when applied).

    Raises:
        DeltaError: no full checkpoint, or a gap (a delta missing) after the newest full
            checkpoint; the message names the version that is missing.
    """
    full: list[tuple[int, Path]] = []
    deltas: dict[int, Path] = {}
    for version, policy in _published(Path(job_root)):
        if upto is not None and version > upto:
            continue
        if is_delta_dir(policy):
            deltas[version] = policy
        elif any(policy.glob("*.safetensors")):
            full.append((version, policy))
    if not full:
        raise DeltaError(f"{job_root}: no full checkpoint to start the policy from")
    full_version, full_dir = max(full)
    chain: list[Path] = []
    version = full_version
    for newer in sorted(v for v in deltas if v > full_version):
        manifest = read_delta_manifest(deltas[newer])
        if manifest.base_version != version:
            raise DeltaError(
                f"gap: the delta of version {newer} applies to version "
                f"{manifest.base_version}, but the chain from the full checkpoint of version "
                f"{full_version} ends at version {version} (the delta of version "
                f"{manifest.base_version} is missing)"
            )
        chain.append(deltas[newer])
        version = newer
    return PolicyChain(full_dir, full_version, tuple(chain), version)
