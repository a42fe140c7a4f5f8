"""Fixtures of the training tests: a scripted model, a policy directory, a bandit dataset.

The "model" answers choice 0 wrong (n + 1), choice 1 right (2n), choice 2 with no code;
the problem has 2 public and 2 hidden tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from tokenizers import Tokenizer, models, pre_tokenizers

from cobalt.orchestrator.store import repo_bandit, repo_datasets, repo_runs
from cobalt.orchestrator.store.models import Problem
from cobalt.orchestrator.store.repo_bandit import ContextRow
from tests.fakes.openai_server import FakeOpenAI, serve_fake_openai

RIGHT = "<think>Double it.</think>\n```python\nprint(2 * int(input()))\n```\n"
WRONG = "<think>Add one, but verify.</think>\n```python\nprint(int(input()) + 1)\n```\n"
NO_CODE = "I do not know."


def answer(messages: list[dict[str, Any]], index: int) -> str:
    return [WRONG, RIGHT, NO_CODE][index % 3]


@pytest.fixture
def model() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI(responder=answer)
    with serve_fake_openai(fake) as url:
        yield fake, url


@pytest.fixture
def policy_dir(tmp_path: Path) -> Path:
    """A policy model directory as far as the reward needs it: its tokenizer.json."""
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    return tmp_path


def bandit_dataset(sessions: sessionmaker[Session]) -> str:
    """Two contexts of one problem: the turn-0 context and one after a wrong first turn."""
    public = [{"stdin": "2", "expected_stdout": "4"}, {"stdin": "3", "expected_stdout": "6"}]
    hidden = [{"stdin": "5", "expected_stdout": "10"}, {"stdin": "0", "expected_stdout": "0"}]
    prompt = [{"role": "user", "content": "Read n, print 2n."}]
    with sessions.begin() as session:
        dataset = repo_datasets.create_dataset(session, name="doubles", source="jsonl")
        repo_datasets.insert_problems(
            session,
            dataset_id=dataset.id,
            rows=[{"external_id": "double", "statement": "Read n, print 2n.",
                   "test_style": "stdin", "public_tests": public, "hidden_tests": hidden}],
        )  # fmt: skip
        problem_id = session.scalars(select(Problem.id)).one()
        run = repo_runs.create_run(
            session, kind="sample", dataset_id=dataset.id, base_url="http://x/v1", model="m",
            params={"n": 1, "turns": 2}, template_name="default", template_sha256="ab" * 32,
            total_trajectories=1,
        )  # fmt: skip
        later = [*prompt, {"role": "assistant", "content": WRONG}, {"role": "user", "content": "3"}]
        repo_bandit.create_bandit_dataset(
            session, name="ctx", source_run_id=run.id, split="train", params={}, counts={},
            contexts=[
                ContextRow(problem_id=problem_id, source_run_id=run.id, trajectory_id=None,
                           assistant_turns=turns, messages=messages, prev_best=best,
                           prompt_tokens=10, template_sha256="ab" * 32)
                for turns, messages, best in ((0, prompt, 0.0), (1, later, 0.25))
            ],
        )  # fmt: skip
    return "ctx"
