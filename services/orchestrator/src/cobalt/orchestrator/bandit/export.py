"""Bandit datasets out of the store: verl's parquet layout, or JSON lines.

verl's RL datasets read a parquet file with, per row, `data_source`, `prompt` (the chat
messages), `ability`, `reward_model` (`style` and `ground_truth`) and `extra_info`; its
reward function receives `data_source`, the response, `ground_truth` and `extra_info`. So
each row carries everything the Cobalt reward needs: the problem's tests (public then
hidden, in the executor's request format, as JSON) as ground truth, and prev_best, the
split and the provenance in extra_info. The file is named after the split
(`train.parquet` or `validation.parquet`), as verl's `data.train_files` /
`data.val_files` expect one file each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy.orm import Session

from cobalt.orchestrator.bandit.options import ExportFormat
from cobalt.orchestrator.store import repo_bandit, repo_datasets
from cobalt.orchestrator.store.models import BanditDataset

__all__ = ["ExportFormat", "export_bandit_dataset", "rows_of"]

ABILITY = "code"


def rows_of(session: Session, dataset: BanditDataset) -> list[dict[str, Any]]:
    """A dataset's contexts as verl rows, in the dataset's (shuffled) order."""
    contexts = repo_bandit.contexts_of(session, dataset_id=dataset.id)
    problems = repo_datasets.problems_by_id(session, ids={c.problem_id for c in contexts})
    rows = []
    for context in contexts:
        problem = problems[context.problem_id]
        tests = [*problem.public_tests, *problem.hidden_tests]
        rows.append(
            {
                "data_source": f"cobalt/{dataset.name}",
                "prompt": [
                    {"role": str(m["role"]), "content": str(m["content"])} for m in context.messages
                ],
                "ability": ABILITY,
                "reward_model": {
                    "style": "rule",
                    "ground_truth": json.dumps(
                        {"tests": tests, "public_tests": len(problem.public_tests)}
                    ),
                },
                "extra_info": {
                    "index": context.position,
                    "split": dataset.split,
                    "prev_best": context.prev_best,
                    "problem": problem.external_id,
                    "problem_id": problem.id,
                    "source_run_id": context.source_run_id,
                    "trajectory_id": context.trajectory_id,
                    "assistant_turns": context.assistant_turns,
                    "prompt_tokens": context.prompt_tokens,
                    "template_sha256": context.template_sha256,
                    "mixed_from_id": context.mixed_from_id,
                },
            }
        )
    return rows


def export_bandit_dataset(
    session: Session, *, name: str, export_format: ExportFormat, out_dir: Path
) -> Path:
    """Write dataset `name` under `out_dir`; returns the file written.

    Raises:
        NotFound: no such dataset.
    """
    dataset = repo_bandit.get_bandit_dataset(session, name=name)
    rows = rows_of(session, dataset)
    out_dir.mkdir(parents=True, exist_ok=True)
    if export_format == ExportFormat.JSONL:
        path = out_dir / f"{dataset.split}.jsonl"
        temporary = path.with_suffix(".jsonl.partial")
        with temporary.open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    else:
        path = out_dir / f"{dataset.split}.parquet"
        temporary = path.with_suffix(".parquet.partial")
        pq.write_table(pa.Table.from_pylist(rows, schema=_SCHEMA), temporary)
    temporary.replace(path)  # never a half-written file under the final name
    return path


_SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        (
            "extra_info",
            pa.struct(
                [
                    ("index", pa.int64()),
                    ("split", pa.string()),
                    ("prev_best", pa.float64()),
                    ("problem", pa.string()),
                    ("problem_id", pa.int64()),
                    ("source_run_id", pa.int64()),
                    ("trajectory_id", pa.int64()),
                    ("assistant_turns", pa.int64()),
                    ("prompt_tokens", pa.int64()),
                    ("template_sha256", pa.string()),
                    ("mixed_from_id", pa.int64()),
                ]
            ),
        ),
    ]
)
