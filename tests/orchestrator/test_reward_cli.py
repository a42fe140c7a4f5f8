"""`cobalt reward score` end to end: a real executor runs the program, the reward follows."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from tests.support.cli import cobalt_here
from tests.support.runs import cobalt, json_out

STDIN_TESTS = [
    {"stdin": "2\n", "expected_stdout": "4"},
    {"stdin": "3\n", "expected_stdout": "6"},
    {"stdin": "0\n", "expected_stdout": "0"},
    {"stdin": "5\n", "expected_stdout": "10"},
]
DOUBLE = "<think>Double it.</think>Here:\n```python\nprint(2 * int(input()))\n```\n"


@pytest.fixture
def env(executor_url: str) -> dict[str, str]:
    """The test executor only: no COBALT_* variable of the machine leaks in."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    return {**clean, "COBALT_EXECUTOR_URL": executor_url}


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    """A model directory whose tokenizer.json counts one token per word or punctuation."""
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    directory = tmp_path / "policy"
    directory.mkdir()
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory


def write(tmp_path: Path, name: str, content: str | list[dict[str, Any]]) -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def score(env: dict[str, str], response: Path, tests: Path, *options: str) -> dict[str, Any]:
    return json_out(
        cobalt(
            env, "reward", "score", "--response", str(response), "--tests", str(tests),
            "--json", *options,
        )
    )  # fmt: skip


def test_scores_follow_the_executor_verdicts(
    env: dict[str, str], policy: Path, tmp_path: Path
) -> None:
    tests = write(tmp_path, "tests.json", STDIN_TESTS)
    tokenizer = ("--tokenizer", str(policy))
    right = score(env, write(tmp_path, "right.txt", DOUBLE), tests, "--prev-best", "0", *tokenizer)
    assert right["verdicts"] == ["accepted"] * 4
    assert (right["total"], right["correctness"], right["pass_rate"]) == (1.0, 1.0, 1.0)
    assert (right["format"], right["validation_reward"], right["tests_passed"]) == (0.0, 1.0, 4)
    assert right["think_tokens"] == 6  # "<think>Double it." with the word tokenizer

    # n*n is right for 2 and 0 only: p = 0.5 = prev_best, so r becomes -0.1 (docs/method.md)
    square = write(
        tmp_path,
        "square.txt",
        "<think>Square it.</think>\n```python\nn=int(input())\nprint(n*n)\n```",
    )
    result = score(env, square, tests, "--prev-best", "0.5", *tokenizer)
    assert result["verdicts"] == ["accepted", "wrong_answer", "accepted", "wrong_answer"]
    assert (result["pass_rate"], result["correctness"]) == (0.5, 0.2)
    assert result["improvement"] == pytest.approx(-0.3)
    assert result["improvement_rule"] == "replaced"
    assert result["format"] > 0  # r < 0 with short thinking: the tanh term
    assert result["total"] == pytest.approx(-0.1 + result["format"])

    none = score(env, write(tmp_path, "none.txt", "I cannot solve this."), tests, "--prev-best",
                 "0.5", *tokenizer)  # fmt: skip
    assert (none["total"], none["no_code"], none["verdicts"]) == (-1.0, True, [])
    assert none["correctness"] is None and none["format"] is None


def test_call_and_checking_program_tests_and_the_tokenizer_variable(
    env: dict[str, str], policy: Path, tmp_path: Path
) -> None:
    tests = write(
        tmp_path,
        "tests.json",
        [
            {"fn_name": "add", "args": [1, 2], "expected": 3},
            {"check": "assert add(2, 2) == 4"},
            {"check": "assert add(2, 2) == 5"},
        ],
    )
    response = write(
        tmp_path,
        "add.txt",
        "<think>Add.</think>\n```python\ndef add(a, b):\n    return a + b\n```\n",
    )
    with_variable = {**env, "COBALT_POLICY_TOKENIZER": str(policy)}
    result = score(with_variable, response, tests, "--prev-best", "0.8")
    # A failed assert is a wrong answer, as in every preset (issue 35), not a runtime error.
    assert result["verdicts"] == ["accepted", "accepted", "wrong_answer"]
    assert result["tests_passed"] == 2 and result["pass_rate"] == pytest.approx(2 / 3)
    assert result["improvement_rule"] == "replaced"  # 2/3 is no gain over 0.8


def test_the_table_names_every_component(env: dict[str, str], policy: Path, tmp_path: Path) -> None:
    done = cobalt(
        env, "reward", "score", "--response", str(write(tmp_path, "r.txt", DOUBLE)),
        "--tests", str(write(tmp_path, "t.json", STDIN_TESTS[:1])), "--prev-best", "0",
        "--tokenizer", str(policy),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for name in ("total", "correctness", "improvement", "format", "pass rate", "verdicts"):
        assert name in done.stdout


def test_bad_input_exits_2_with_a_message(
    env: dict[str, str], policy: Path, tmp_path: Path
) -> None:
    response = write(tmp_path, "r.txt", DOUBLE)
    good_tests = write(tmp_path, "tests.json", STDIN_TESTS)
    cases = [
        (["--tests", str(write(tmp_path, "bad.json", '[{"stdin": 1}]'))], "not a JSON list"),
        (["--tests", str(write(tmp_path, "obj.json", '{"stdin": ""}'))], "not a JSON list"),
        (["--tests", str(write(tmp_path, "empty.json", "[]"))], "holds no tests"),
        (["--tests", str(tmp_path / "missing.json")], "cannot read"),
        (["--response", str(tmp_path / "missing.txt")], "cannot read"),
        (["--tokenizer", str(tmp_path)], "no tokenizer.json"),
        (["--prev-best", "1.5"], "prev-best"),
    ]
    for extra, message in cases:
        args = ["--response", str(response), "--tests", str(good_tests), "--prev-best", "0.5"]
        done = cobalt_here(env, "reward", "score", *args, "--tokenizer", str(policy), *extra)
        assert done.returncode == 2, (extra, done.stderr)
        assert message in done.stderr, (extra, done.stderr)
    no_tokenizer = cobalt_here(
        env, "reward", "score", "--response", str(response), "--tests", str(good_tests),
        "--prev-best", "0",
    )  # fmt: skip
    assert no_tokenizer.returncode == 2
    assert "--tokenizer" in no_tokenizer.stderr and "COBALT_POLICY_TOKENIZER" in no_tokenizer.stderr


def test_an_unreachable_executor_exits_3(policy: Path, tmp_path: Path) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    done = cobalt(
        {**clean, "COBALT_EXECUTOR_URL": "http://127.0.0.1:9"}, "reward", "score",
        "--response", str(write(tmp_path, "r.txt", DOUBLE)),
        "--tests", str(write(tmp_path, "t.json", STDIN_TESTS)), "--prev-best", "0",
        "--tokenizer", str(policy),
    )  # fmt: skip
    assert done.returncode == 3 and "not ready" in done.stderr


def test_instruct_format_scores_a_model_without_thinking_on_its_program(
    env: dict[str, str], policy: Path, tmp_path: Path
) -> None:
    """The same correct answer without `</think>`: +0.1 under the paper's rules (the format
    term's -0.9), 1.0 with --reward-format instruct."""
    tests = write(tmp_path, "tests.json", STDIN_TESTS)
    plain = write(tmp_path, "plain.txt", "Here:\n```python\nprint(2 * int(input()))\n```\n")
    options = ("--prev-best", "0", "--tokenizer", str(policy))
    paper = score(env, plain, tests, *options)
    assert paper["verdicts"] == ["accepted"] * 4
    assert paper["format_violations"] == ["think_delimiter"]
    assert paper["total"] == pytest.approx(0.1)
    instruct = score(env, plain, tests, *options, "--reward-format", "instruct")
    assert instruct["format_violations"] == [] and instruct["think_tokens"] == 0
    assert instruct["total"] == 1.0
    refused = cobalt_here(
        env, "reward", "score", "--response", str(plain), "--tests", str(tests), *options,
        "--reward-format", "thinking",
    )  # fmt: skip
    assert refused.returncode == 2 and "instruct" in refused.stderr
