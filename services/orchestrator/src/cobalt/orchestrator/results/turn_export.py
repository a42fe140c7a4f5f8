"""A run's turns, one row each, as JSONL (optionally gzipped) or Parquet, by the suffix.

`cobalt run export ID --turns --out FILE`. Each row holds what a turn is (run, problem,
sample, turn, model, policy version), what it said (the raw response, the extracted
program, the feedback it earned), how it was judged (public and hidden verdicts and
per-test outputs, pass flags), what it cost (tokens, latencies, finish reason) and its
stored Cobalt reward with every component and the format rules it was scored with
(docs/results.md lists the columns). In Parquet the nested values (verdict lists,
per-test outputs, the reward) are JSON text (decode with `json.loads`), so every file has
one schema whatever the run holds.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.datasets.export import export_format, write_replacing
from cobalt.orchestrator.store import repo_datasets, repo_rewards, repo_runs
from cobalt.orchestrator.store.models import Turn, TurnReward

__all__ = ["JSON_COLUMNS", "TURN_COLUMNS", "export_run_turns", "turn_rows"]

TURN_COLUMNS: dict[str, str] = {
    "run_id": "int64",
    "problem": "string",
    "sample_index": "int64",
    "turn_index": "int64",
    "model": "string",
    "policy_version": "int64",
    "response": "string",
    "program": "string",
    "feedback": "string",
    "finish_reason": "string",
    "prompt_tokens": "int64",
    "completion_tokens": "int64",
    "model_latency_ms": "float64",
    "exec_latency_ms": "float64",
    "public_passed": "bool",
    "hidden_passed": "bool",
    "public_verdicts": "json",
    "hidden_verdicts": "json",
    "public_outputs": "json",
    "hidden_outputs": "json",
    "reward_format": "string",
    "reward": "json",
}
"""Every column and its Parquet type (`json`: JSON text in Parquet, a value in JSONL)."""

JSON_COLUMNS = tuple(name for name, kind in TURN_COLUMNS.items() if kind == "json")

_TRAJECTORIES_PER_BATCH = 256
"""Trajectories read at once: bounds memory (responses can be 20k characters)."""

_REWARD_SKIPPED = frozenset({"turn_id", "run_id", "turn_index", "created_at"})


def _reward(row: TurnReward | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return {
        column.key: getattr(row, column.key)
        for column in TurnReward.__table__.columns
        if column.key not in _REWARD_SKIPPED
    }


def _row(turn: Turn, problem: str, reward: TurnReward | None, fmt: str) -> dict[str, Any]:
    return {
        "run_id": turn.run_id,
        "problem": problem,
        "sample_index": turn.sample_index,
        "turn_index": turn.turn_index,
        "model": turn.model,
        "policy_version": turn.policy_version,
        "response": turn.raw_response,
        "program": turn.code,
        "feedback": turn.feedback,
        "finish_reason": turn.finish_reason,
        "prompt_tokens": turn.prompt_tokens,
        "completion_tokens": turn.completion_tokens,
        "model_latency_ms": turn.model_latency_ms,
        "exec_latency_ms": turn.exec_latency_ms,
        "public_passed": turn.public_passed,
        "hidden_passed": turn.hidden_passed,
        "public_verdicts": turn.public_verdicts,
        "hidden_verdicts": turn.hidden_verdicts,
        "public_outputs": turn.public_outputs,
        "hidden_outputs": turn.hidden_outputs,
        "reward_format": fmt,
        "reward": _reward(reward),
    }


def turn_rows(session: Session, run_id: int) -> Iterator[list[dict[str, Any]]]:
    """The run's turns as rows, by problem, sample and turn, a batch of trajectories at a
    time.

    Raises:
        NotFound: no such run.
    """
    run = repo_runs.get_run(session, run_id=run_id)
    fmt = str(run.params.reward_format)
    problems = repo_datasets.external_ids(session, dataset_id=run.dataset_id)
    trajectory_ids = repo_rewards.trajectory_ids_of_run(session, run_id=run_id)
    for start in range(0, len(trajectory_ids), _TRAJECTORIES_PER_BATCH):
        batch = trajectory_ids[start : start + _TRAJECTORIES_PER_BATCH]
        turns = repo_rewards.turns_of_trajectories(session, trajectory_ids=batch)
        rewards = repo_rewards.rewards_of_turns(session, turn_ids=[t.id for t in turns])
        rows = [_row(t, problems.get(t.problem_id, ""), rewards.get(t.id), fmt) for t in turns]
        rows.sort(key=lambda r: (r["problem"], r["sample_index"], r["turn_index"]))
        yield rows


def _write_jsonl(out: IO[bytes], batches: Iterator[list[dict[str, Any]]], gzipped: bool) -> int:
    stream: IO[bytes] | gzip.GzipFile = gzip.GzipFile(fileobj=out, mode="wb") if gzipped else out
    rows = 0
    for batch in batches:
        stream.write(b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in batch))
        rows += len(batch)
    if gzipped:
        stream.close()  # the gzip trailer; `out` stays open
    return rows


def _write_parquet(out: IO[bytes], batches: Iterator[list[dict[str, Any]]]) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            pa.field(name, pa.string() if kind == "json" else pa.type_for_alias(kind))
            for name, kind in TURN_COLUMNS.items()
        ]
    )
    rows = 0
    with pq.ParquetWriter(out, schema, compression="zstd") as writer:
        for batch in batches:
            encoded = [
                {
                    k: json.dumps(v) if k in JSON_COLUMNS and v is not None else v
                    for k, v in r.items()
                }
                for r in batch
            ]
            writer.write_table(pa.Table.from_pylist(encoded, schema=schema))
            rows += len(batch)
        if rows == 0:
            writer.write_table(schema.empty_table())
    return rows


def export_run_turns(sessions: sessionmaker[Session], run_id: int, out: Path) -> int:
    """Write every turn of run `run_id` to `out` (by its suffix: .jsonl, .jsonl.gz,
    .parquet), replacing it whole. Returns the rows written.

    Raises:
        InvalidInput: an unknown suffix, or the directory of `out` does not exist.
        NotFound: no such run.
    """
    fmt = export_format(out)
    with sessions() as session:
        repo_runs.get_run(session, run_id=run_id)  # NotFound before any file is made
        batches = turn_rows(session, run_id)

        def write(handle: IO[bytes]) -> int:
            if fmt == "parquet":
                return _write_parquet(handle, batches)
            return _write_jsonl(handle, batches, out.name.lower().endswith(".gz"))

        return write_replacing(out, write)
