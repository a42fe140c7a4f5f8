"""`cobalt bandit build|show|list|export|delete` end to end, with a real (tiny) tokenizer.

The tokenizer is made here with the `tokenizers` library (a word-level vocabulary and a
chat template in the Qwen style), so the token cap is tested on a rendered prompt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from sqlalchemy.orm import Session, sessionmaker
from tokenizers import Tokenizer, models, pre_tokenizers

from cobalt.orchestrator.bandit.prompt_length import PromptTokenCounter
from cobalt.shared.contracts.runs import RunParams
from cobalt.shared.errors import InvalidInput
from tests.support.bandit import LONG_ANSWER, PROMPT, stored_run
from tests.support.cli import cobalt_here
from tests.support.runs import cobalt, json_out

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    words = ["[UNK]", "<|im_start|>", "<|im_end|>", "system", "user", "assistant"]
    words += ["sys", "task", "answer", "feedback", "word", "raw"]
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split("<|im_start|>", "isolated"),
            pre_tokenizers.Split("<|im_end|>", "isolated"),
            pre_tokenizers.Whitespace(),
        ]
    )
    tokenizer.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    directory = tmp_path / "policy"
    directory.mkdir()
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": CHAT_TEMPLATE, "eos_token": "<|im_end|>"})
    )
    return directory


def test_the_counter_renders_the_chat_template_and_counts_its_tokens(tokenizer_dir: Path) -> None:
    counter = PromptTokenCounter.from_dir(tokenizer_dir)
    assert counter.render(PROMPT) == (
        "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\ntask<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    # 3 markers + role + text per message, and the generation prompt's 2.
    assert counter.count(PROMPT) == 2 * 4 + 2
    assert counter.count([{"role": "user", "content": "word word word"}]) == 4 + 2 + 2


def test_a_directory_without_a_tokenizer_or_template_is_a_clear_error(
    tmp_path: Path, tokenizer_dir: Path
) -> None:
    with pytest.raises(InvalidInput, match="no tokenizer.json"):
        PromptTokenCounter.from_dir(tmp_path)
    (tokenizer_dir / "tokenizer_config.json").write_text("{}")
    with pytest.raises(InvalidInput, match="no chat template"):
        PromptTokenCounter.from_dir(tokenizer_dir)


def test_build_show_export_and_delete(
    cli_env: dict[str, str],
    sessions: sessionmaker[Session],
    tokenizer_dir: Path,
    tmp_path: Path,
) -> None:
    run_id, _ = stored_run(sessions)
    env = {**cli_env, "COBALT_POLICY_TOKENIZER": str(tokenizer_dir)}
    # p3's second trajectory has a 400-word answer: its context after 2 turns is > 300.
    built = json_out(
        cobalt(
            env,
            "bandit",
            "build",
            "--run",
            str(run_id),
            "--name",
            "b",
            "--max-tokens",
            "300",
            "--json",
        )
    )
    assert built["contexts"] == 9 and built["counts"]["dropped_over_token_cap"] == 1
    assert len(LONG_ANSWER.split()) == 400

    shown = json_out(cobalt(env, "bandit", "show", "b", "--json"))
    assert shown["split"] == "train" and shown["source_run_id"] == run_id
    assert shown["params"]["max_prompt_tokens"] == 300
    assert shown["params"]["tokenizer"] == str(tokenizer_dir)
    assert len(shown["context_list"]) == 9
    counter = PromptTokenCounter.from_dir(tokenizer_dir)
    for context in shown["context_list"]:
        assert context["prompt_tokens"] == counter.count(context["messages"]) <= 300
    text = cobalt(env, "bandit", "show", "b")
    assert text.returncode == 0 and "dropped over token cap" in text.stdout

    listed = json_out(cobalt(env, "bandit", "list", "--json"))
    assert [(d["name"], d["contexts"]) for d in listed["bandit_datasets"]] == [("b", 9)]

    out = tmp_path / "verl"
    exported = json_out(cobalt(env, "bandit", "export", "b", "--out", str(out), "--json"))
    assert exported["path"] == str(out / "train.parquet")
    table = pq.read_table(out / "train.parquet").to_pylist()
    assert len(table) == 9 and not list(out.glob("*.partial"))
    by_position = {c["position"]: c for c in shown["context_list"]}
    for index, row in enumerate(table):
        context = by_position[index]
        assert row["prompt"] == context["messages"] and row["ability"] == "code"
        assert row["extra_info"]["prev_best"] == context["prev_best"]
        assert row["extra_info"]["split"] == "train"
        truth: dict[str, Any] = json.loads(row["reward_model"]["ground_truth"])
        assert truth["public_tests"] == 2 and len(truth["tests"]) == 4
    lines = cobalt(env, "bandit", "export", "b", "--out", str(tmp_path / "j"), "--format", "jsonl")
    assert lines.returncode == 0
    rows = [json.loads(line) for line in (tmp_path / "j" / "train.jsonl").read_text().splitlines()]
    assert [r["prompt"] for r in rows] == [r["prompt"] for r in table]

    assert cobalt(env, "bandit", "delete", "b").returncode == 0
    gone = cobalt(env, "bandit", "show", "b")
    assert gone.returncode == 2 and "no bandit dataset named 'b'" in gone.stderr


def test_bad_arguments_exit_2_with_a_message(
    cli_env: dict[str, str], sessions: sessionmaker[Session], tokenizer_dir: Path
) -> None:
    run_id, _ = stored_run(sessions)
    env = {**cli_env, "COBALT_POLICY_TOKENIZER": str(tokenizer_dir)}
    cases = [
        (["--run", str(run_id), "--name", "x", "--mix", "nocolon"], "NAME:RATIO"),
        (["--run", str(run_id), "--name", "x", "--mix", "other:0.5"], "no bandit dataset"),
        (["--run", "999", "--name", "x"], "run 999 does not exist"),
        (["--run", str(run_id), "--name", "x", "--tokenizer", "/nonexistent"], "tokenizer.json"),
        (["--run", str(run_id), "--name", "x", "--research-validation"], "add --validation"),
    ]
    for args, message in cases:
        done = cobalt_here(env, "bandit", "build", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr, (args, done.stderr)
    listed = json_out(cobalt_here(env, "bandit", "list", "--json"))
    assert listed["bandit_datasets"] == []  # nothing half-built


def test_a_run_without_feedback_turns_is_refused_unless_turn_zero_is_asked_for(
    cli_env: dict[str, str], sessions: sessionmaker[Session], tokenizer_dir: Path
) -> None:
    """Issue 49: a sample run built 0 partial contexts with exit 0, so "Cobalt" training
    silently became single-turn GRPO."""
    from cobalt.orchestrator.store import repo_runs
    from cobalt.orchestrator.store.models import Run

    run_id, _ = stored_run(sessions)
    with sessions.begin() as session:
        run = session.get(Run, run_id)
        assert run is not None
        run.params = run.params.model_copy(update={"feedback_turns": 0})  # turn 0 only
    env = {**cli_env, "COBALT_POLICY_TOKENIZER": str(tokenizer_dir)}
    build = ("bandit", "build", "--run", str(run_id), "--name", "b", "--max-tokens", "200")
    done = cobalt_here(env, *build)
    assert done.returncode == 2 and done.stderr.startswith("error: ")
    assert "no feedback turns" in done.stderr and f"refine --from {run_id}" in done.stderr
    with sessions.begin() as session:
        refine = repo_runs.create_run(
            session, kind="refine", dataset_id=run.dataset_id, parent_run_id=run_id,
            base_url="http://model/v1", model="m", params=RunParams(n=7, turns=2),
            template_name="default", template_sha256="ab" * 32, total_trajectories=11,
        )  # fmt: skip
    done = cobalt_here(env, *build)
    assert done.returncode == 2 and f"build from its refine run {refine.id}," in done.stderr
    assert json_out(cobalt_here(env, "bandit", "list", "--json"))["bandit_datasets"] == []
    built = json_out(cobalt_here(env, *build, "--turn-zero-only", "--json"))
    assert built["contexts"] > 0 and built["counts"]["turn_0_contexts"] > 0
