"""Experiment trackers: the trainer's steps and the evaluations' Pass@1, sent to
TensorBoard, MLflow and Weights & Biases as TRL's `report_to` does.

`report_to` names the trackers (`COBALT_REPORT_TO=tensorboard,mlflow,wandb`, `all` or
`none`, the default; `--report-to` on `cobalt train start` and `cobalt run evaluate`).
Each tracker is an optional extra (`cobalt-shared[trackers]`), imported only when it is
asked for, and each keeps its own configuration: MLFLOW_TRACKING_URI and
MLFLOW_EXPERIMENT_NAME, WANDB_MODE, WANDB_PROJECT, WANDB_DIR and the rest of W&B's
variables; TensorBoard writes event files under COBALT_TENSORBOARD_DIR, one directory
per Cobalt run. Where a tracker's own project variable is unset, COBALT_TRACKER_PROJECT
names the MLflow experiment and the W&B project.

Failure policy: a tracker is a copy of metrics Cobalt already stores (the database,
Prometheus), so a tracker never stops training or evaluation. A tracker that cannot be
imported is a usage error found before any work starts (`TrackerMissing`, with the
install command). A tracker that fails at run time (an MLflow server that does not answer,
a full disk) is reported with one warning and left out for the rest of the run; the other
trackers go on. How long a call to an unreachable server waits before failing is the
tracker's own setting (MLFLOW_HTTP_REQUEST_MAX_RETRIES, MLFLOW_HTTP_REQUEST_TIMEOUT).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from pydantic import Field, field_validator

from cobalt.shared.errors import InvalidInput
from cobalt.shared.settings import CobaltSettings

__all__ = [
    "TRACKERS",
    "Reporter",
    "Reporters",
    "TrackedRun",
    "TrackerMissing",
    "TrackerSettings",
    "check_installed",
    "flatten_config",
    "open_reporters",
    "parse_report_to",
]

logger = logging.getLogger(__name__)

TRACKERS = ("tensorboard", "mlflow", "wandb")
"""Every tracker Cobalt reports to, in the order they are opened; each is imported, and
installed as an extra of cobalt-shared, under its own name."""


class TrackerMissing(InvalidInput):
    """A tracker was asked for but its package is not installed here."""


def parse_report_to(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """The trackers named by a `report_to` value: `none` (or empty), `all`, or names
    separated by commas; each once, in TRACKERS order.

    Raises:
        InvalidInput: a name that is no tracker (the message lists the known ones).
    """
    if value is None:
        return ()
    parts = value.split(",") if isinstance(value, str) else list(value)
    names = {part.strip().lower() for part in parts if part.strip()}
    if names <= {"none"}:
        return ()
    if "all" in names:
        return TRACKERS
    unknown = sorted(names - set(TRACKERS))
    if unknown or "none" in names:
        wrong = ", ".join(unknown) or "none with a tracker"
        raise InvalidInput(
            f"{wrong} is not a tracker; use none, all or any of "
            f"{', '.join(TRACKERS)} separated by commas"
        )
    return tuple(name for name in TRACKERS if name in names)


def _default_tensorboard_dir() -> Path:
    """Event files under the user's data directory, beside the checkpoints."""
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "cobalt" / "tensorboard"


class TrackerSettings(CobaltSettings):
    """Which trackers a process reports to and where TensorBoard writes; every other
    tracker setting is the tracker's own environment variable."""

    report_to: str = "none"
    """`none`, `all`, or tracker names separated by commas (tensorboard, mlflow, wandb)."""
    tensorboard_dir: Path = Field(default_factory=_default_tensorboard_dir)
    """Root of TensorBoard's event files; each Cobalt run writes in its own folder
    (`train-job-3`, `eval-run-5-...`), so `tensorboard --logdir` this folder shows all."""
    tracker_project: str = "cobalt"
    """MLflow experiment and W&B project when MLFLOW_EXPERIMENT_NAME / WANDB_PROJECT are
    unset."""

    @field_validator("report_to")
    @classmethod
    def _known_trackers(cls, value: str) -> str:
        try:
            parse_report_to(value)
        except InvalidInput as exc:
            raise ValueError(exc.message) from exc
        return value


@dataclass(frozen=True)
class TrackedRun:
    """What the trackers call one Cobalt run (a training job or one evaluation)."""

    key: str
    """Stable, unique within this Cobalt store and filesystem-safe: TensorBoard's folder,
    the MLflow tag `cobalt.run` and, with `resume`, the W&B run id."""
    name: str
    """Display name in the trackers' UIs."""
    kind: str
    """`train` or `evaluation` (a tag in MLflow, the job type in W&B)."""
    resume: bool = False
    """A restarted process goes on with the same tracker run (training); otherwise every
    report is a new tracker run (each evaluation)."""
    tags: dict[str, str] = field(default_factory=dict)


class Reporter(Protocol):
    """One tracker's side of a run: the config once, metrics per step, then close."""

    def log_config(self, config: Mapping[str, Any]) -> None: ...

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None: ...

    def close(self) -> None: ...


def flatten_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested config as dotted keys with string values (MLflow params, TensorBoard text)."""
    flat: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_config(value, prefix=f"{name}."))
        else:
            flat[name] = value if isinstance(value, str) else json.dumps(value, default=str)
    return flat


class TensorBoardReporter:
    """Scalars as `simple_value` events (what TensorBoard's scalar dashboard and
    EventAccumulator read) and the config as one text summary, written with the
    tensorboard package's own event-file writer (no torch, no TensorFlow)."""

    def __init__(self, run: TrackedRun, settings: TrackerSettings) -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.log_dir = settings.tensorboard_dir / run.key
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._writer = EventFileWriter(str(self.log_dir))

    def log_config(self, config: Mapping[str, Any]) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.plugins.text.summary_v2 import text_pb

        rows = "\n".join(f"| {k} | {v} |" for k, v in sorted(flatten_config(config).items()))
        table = f"| setting | value |\n|---|---|\n{rows}"
        self._writer.add_event(
            Event(wall_time=time.time(), step=0, summary=text_pb("config", table))
        )
        self._writer.flush()

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        values = [Summary.Value(tag=k, simple_value=float(v)) for k, v in metrics.items()]
        self._writer.add_event(
            Event(wall_time=time.time(), step=step, summary=Summary(value=values))
        )
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


_MLFLOW_PARAM_CHARS = 6000  # MLflow's limit on one param value
_MLFLOW_BATCH = 100  # params per log_batch call (MLflow's limit)


class MlflowReporter:
    """One MLflow run through MlflowClient (no global active run), at MLFLOW_TRACKING_URI.

    A resumable run (training) is found again by its `cobalt.run` tag in the experiment.
    """

    def __init__(self, run: TrackedRun, settings: TrackerSettings) -> None:
        from mlflow.tracking import MlflowClient

        self._client = MlflowClient()
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or settings.tracker_project
        experiment = self._client.get_experiment_by_name(name)
        experiment_id = (
            experiment.experiment_id if experiment else self._client.create_experiment(name)
        )
        found = (
            self._client.search_runs(
                [experiment_id], filter_string=f"tags.`cobalt.run` = '{run.key}'", max_results=1
            )
            if run.resume
            else []
        )
        tags = {"cobalt.run": run.key, "cobalt.kind": run.kind, **run.tags}
        if found:
            self.run_id = found[0].info.run_id
            self._client.update_run(self.run_id, status="RUNNING")
        else:
            created = self._client.create_run(experiment_id, run_name=run.name, tags=tags)
            self.run_id = created.info.run_id

    def log_config(self, config: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        # A param cannot change once logged: a resumed run keeps the values it started with
        # (a restart on another machine may override micro_batch_tokens, for one).
        logged = self._client.get_run(self.run_id).data.params
        params = [
            Param(k, v[:_MLFLOW_PARAM_CHARS])
            for k, v in sorted(flatten_config(config).items())
            if k not in logged
        ]
        for start in range(0, len(params), _MLFLOW_BATCH):
            self._client.log_batch(self.run_id, params=params[start : start + _MLFLOW_BATCH])

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [Metric(k, float(v), now, step) for k, v in metrics.items()]
        self._client.log_batch(self.run_id, metrics=batch)

    def close(self) -> None:
        self._client.set_terminated(self.run_id)


class WandbReporter:
    """One W&B run; WANDB_MODE (offline, disabled), WANDB_DIR and the rest are W&B's.

    A resumable run has the fixed id `run.key` and `resume="allow"`; W&B keeps the first
    value of a step it already has (a resumed trainer replays a few steps).
    """

    def __init__(self, run: TrackedRun, settings: TrackerSettings) -> None:
        import wandb

        project = os.environ.get("WANDB_PROJECT") or settings.tracker_project
        self._run = wandb.init(
            project=project,
            name=run.name,
            job_type=run.kind,
            tags=[run.kind],
            id=re.sub(r"[^A-Za-z0-9_-]", "-", run.key) if run.resume else None,
            resume="allow" if run.resume else None,
            reinit="create_new",
            settings=wandb.Settings(console="off", silent=True),
        )

    def log_config(self, config: Mapping[str, Any]) -> None:
        self._run.config.update(dict(config), allow_val_change=True)  # type: ignore[no-untyped-call]

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self._run.log(dict(metrics), step=step)

    def close(self) -> None:
        self._run.finish()


_OPENERS: dict[str, Callable[[TrackedRun, TrackerSettings], Reporter]] = {
    "tensorboard": TensorBoardReporter,
    "mlflow": MlflowReporter,
    "wandb": WandbReporter,
}


class Reporters:
    """The trackers of one run behind one Reporter: each call goes to every tracker still
    working; a tracker that raises is warned about once and dropped (module docstring)."""

    def __init__(self, reporters: Mapping[str, Reporter]) -> None:
        self._reporters = dict(reporters)
        self.failed: dict[str, str] = {}
        """Trackers left out, with the error that made them so."""

    @property
    def names(self) -> tuple[str, ...]:
        """The trackers still reported to."""
        return tuple(self._reporters)

    def _each(self, call: Callable[[Reporter], None]) -> None:
        for name, reporter in list(self._reporters.items()):
            try:
                call(reporter)
            except Exception as exc:  # any tracker error: never the caller's problem
                self._drop(name, exc)

    def add(self, name: str, open_reporter: Callable[[], Reporter]) -> None:
        """Open one more tracker; one that fails to open is warned about and left out."""
        try:
            self._reporters[name] = open_reporter()
        except Exception as exc:  # the tracker's own errors, whatever their class
            self._drop(name, exc)

    def _drop(self, name: str, exc: BaseException) -> None:
        self._reporters.pop(name, None)
        self.failed[name] = f"{type(exc).__name__}: {exc}"
        logger.warning(
            "tracker %s failed (%s); going on without it for the rest of this run",
            name,
            self.failed[name],
        )

    def log_config(self, config: Mapping[str, Any]) -> None:
        self._each(lambda reporter: reporter.log_config(config))

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self._each(lambda reporter: reporter.log_metrics(metrics, step))

    def close(self) -> None:
        self._each(lambda reporter: reporter.close())
        self._reporters.clear()

    def __enter__(self) -> Reporters:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_installed(names: Iterable[str]) -> None:
    """Raise `TrackerMissing` for the first tracker whose package is not importable."""
    import importlib.util

    for name in names:
        if importlib.util.find_spec(name) is None:
            raise TrackerMissing(
                f"report_to {name}: the {name} package is not installed here; "
                f"install it with pip install 'cobalt-shared[{name}]' "
                "(`make setup` installs every tracker)"
            )


def open_reporters(
    report_to: str | Iterable[str] | None, run: TrackedRun, settings: TrackerSettings
) -> Reporters:
    """Open every tracker `report_to` names for `run`.

    Raises:
        InvalidInput: an unknown tracker name.
        TrackerMissing: a named tracker's package is not installed.
    A tracker that fails to open (an unreachable server) is warned about and left out.
    """
    names = parse_report_to(report_to)
    check_installed(names)
    reporters = Reporters({})
    for name in names:
        reporters.add(name, partial(_OPENERS[name], run, settings))
    return reporters
