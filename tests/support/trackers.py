"""Offline experiment trackers for tests, and what they stored read back with each
tracker's own reader: TensorBoard's EventAccumulator, the MLflow client on a local file
store, and W&B's offline transaction log (`run-*.wandb`) decoded into its protobuf records.

`offline_trackers(tmp)` is the environment a test (or a `cobalt` subprocess) needs:
TensorBoard under tmp/tensorboard, MLflow's file store at tmp/mlruns, W&B offline under
tmp/wandb. Each reader returns {metric: {step: value}}.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from cobalt.shared.ports import free_port

_WANDB_BLOCK = 32768  # the transaction log is written in blocks, LevelDB's log format
_WANDB_HEADER = 7  # ":W&B", a 2-byte magic and a version byte


def offline_trackers(root: Path) -> dict[str, str]:
    """Environment variables that keep all three trackers on local files under `root`."""
    return {
        "COBALT_TENSORBOARD_DIR": str(root / "tensorboard"),
        "MLFLOW_TRACKING_URI": (root / "mlruns").as_uri(),
        # MLflow 3 keeps the file store only for those who ask for it (no database needed).
        "MLFLOW_ALLOW_FILE_STORE": "true",
        "MLFLOW_EXPERIMENT_NAME": "cobalt-tests",
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(root),
        "WANDB_PROJECT": "cobalt-tests",
        "WANDB_SILENT": "true",
        "WANDB_DISABLE_GIT": "true",
        "WANDB_DISABLE_CODE": "true",
        "WANDB__DISABLE_STATS": "true",
    }


def unreachable_mlflow() -> dict[str, str]:
    """MLflow pointed at a local port nothing listens on, failing at once (no retries)."""
    port = free_port()
    return {
        "MLFLOW_TRACKING_URI": f"http://127.0.0.1:{port}",
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
        "MLFLOW_HTTP_REQUEST_TIMEOUT": "2",
    }


def as_float32(by_metric: dict[str, dict[int, float]]) -> dict[str, dict[int, float]]:
    """The values as TensorBoard keeps them: a scalar event holds a 32-bit float."""
    return {
        name: {
            step: struct.unpack("<f", struct.pack("<f", value))[0] for step, value in steps.items()
        }
        for name, steps in by_metric.items()
    }


def tensorboard_scalars(log_dir: Path) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir))
    events.Reload()
    return {
        tag: {event.step: event.value for event in events.Scalars(tag)}
        for tag in events.Tags()["scalars"]
    }


def tensorboard_text(log_dir: Path, tag: str) -> str:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    events = EventAccumulator(str(log_dir))
    events.Reload()
    value = tensor_util.make_ndarray(events.Tensors(tag)[-1].tensor_proto)
    return bytes(value.item()).decode()


def mlflow_runs(tracking_uri: str, experiment: str) -> list[Any]:
    """Every run of the experiment (mlflow.entities.Run), oldest first."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    found = client.get_experiment_by_name(experiment)
    assert found is not None, f"no MLflow experiment {experiment}"
    return list(reversed(client.search_runs([found.experiment_id])))


def mlflow_metrics(tracking_uri: str, run_id: str) -> dict[str, dict[int, float]]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    names = client.get_run(run_id).data.metrics
    return {
        name: {m.step: m.value for m in client.get_metric_history(run_id, name)} for name in names
    }


def wandb_offline_runs(wandb_dir: Path) -> list[Path]:
    """The transaction logs of the offline runs under WANDB_DIR, oldest first."""
    return sorted((wandb_dir / "wandb").glob("offline-run-*/run-*.wandb"))


def wandb_records(path: Path) -> list[Any]:
    """The protobuf records of a W&B transaction log, in order."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B transaction log"
    records, pending, position = [], b"", _WANDB_HEADER
    while position + 7 <= len(data):
        left_in_block = _WANDB_BLOCK - position % _WANDB_BLOCK
        if left_in_block < 7:  # a block's tail too short for a header is padding
            position += left_in_block
            continue
        _checksum, length, kind = struct.unpack("<IHB", data[position : position + 7])
        pending += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # a whole record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
        elif kind == 0 and length == 0:
            pending = b""
    return records


def wandb_history(path: Path) -> dict[str, dict[int, float]]:
    """{metric: {step: value}} of the run's history rows (W&B's own keys left out)."""
    history: dict[str, dict[int, float]] = {}
    for record in wandb_records(path):
        if record.WhichOneof("record_type") != "history":
            continue
        step = record.history.step.num
        for item in record.history.item:
            key, value = item.key or "/".join(item.nested_key), json.loads(item.value_json)
            if not key.startswith("_"):
                history.setdefault(key, {})[step] = value
    return history


def wandb_config(path: Path) -> dict[str, Any]:
    """The run's config as W&B stored it (its own `_wandb` key left out)."""
    config: dict[str, Any] = {}
    for record in wandb_records(path):
        kind = record.WhichOneof("record_type")
        updates = (
            record.run.config.update if kind == "run"
            else record.config.update if kind == "config" else []
        )  # fmt: skip
        for item in updates:
            if item.key != "_wandb":
                config[item.key] = json.loads(item.value_json)
    return config


def wandb_run_record(path: Path) -> Any:
    """The run record (id, display name, project, job type)."""
    return next(r.run for r in wandb_records(path) if r.WhichOneof("record_type") == "run")
