"""Text with NUL (U+0000) is stored on both stores, as U+2400, never a failed write.

A tiny model's sampled bytes, a judged program's output, an imported file or an API
client can all carry NUL, which PostgreSQL text cannot hold; one such character used to
fail a run's problem with psycopg.DataError.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store import repo_datasets
from cobalt.orchestrator.store.models import Dataset, Problem
from cobalt.orchestrator.store.text import NUL_SYMBOL, without_nul
from tests.support.runs import PROBLEMS


def test_nul_in_text_and_varchar_is_stored_as_its_symbol_and_json_keeps_it(
    sessions: sessionmaker[Session],
) -> None:
    row = PROBLEMS[0].model_dump(mode="json")
    row["statement"] = "read\x00me"
    row["external_id"] = "id\x00"
    row["public_tests"][0]["expected"] = "out\x00put"
    with sessions.begin() as session:
        created = repo_datasets.create_dataset(session, name="nul\x00name", source="jsonl")
        repo_datasets.insert_problems(session, dataset_id=created.id, rows=[row])
    with sessions() as session:
        problem = session.scalars(select(Problem)).one()
        dataset = session.scalars(select(Dataset)).one()
    assert dataset.name == f"nul{NUL_SYMBOL}name"
    assert problem.statement == f"read{NUL_SYMBOL}me"
    assert problem.external_id == f"id{NUL_SYMBOL}"
    # JSON keeps it as written (PostgreSQL json stores the \u0000 escape).
    assert problem.public_tests[0]["expected"] == "out\x00put"


def test_without_nul_reaches_every_string_of_a_json_value() -> None:
    value = {"a\x00": ["x\x00", {"y": "\x00"}, 3, None, True], "n": 1.5}
    assert without_nul(value) == {
        f"a{NUL_SYMBOL}": [f"x{NUL_SYMBOL}", {"y": NUL_SYMBOL}, 3, None, True],
        "n": 1.5,
    }
    assert without_nul("plain") == "plain"
