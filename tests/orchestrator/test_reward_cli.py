"""`cobalt reward score` end to end: a real executor runs the program, the reward follows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from tests.orchestrator.test_runs import cobalt, json_out

TESTS = [
    {"stdin": "2\n", "expected_stdout": "4"},
    {"stdin": "3\n", "expected_stdout": "6"},
    {"stdin": "0\n", "expected_stdout": "0"},
    {"stdin": "5\n", "expected_stdout": "10"},
]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    policy = tmp_path / "policy"
    policy.mkdir()
    tokenizer.save(str(policy / "tokenizer.json"))
    tests = tmp_path / "tests.json"
    tests.write_text(json.dumps(TESTS))
    return {"policy": policy, "tests": tests, "dir": tmp_path}


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path


def score(env: dict[str, str], files: dict[str, Path], response: Path, *extra: str) -> dict:
    return json_out(
        cobalt(
            env,
            "reward", "score",
            "--response", str(response),
            "--tests", str(files["tests"]),
            "--tokenizer", str(files["policy"]),
            "--json",
            *extra,
        )
    )  # fmt: skip


def test_scores_follow_the_executor_verdicts(
    cli_env: dict[str, str], files: dict[str, Path]
) -> None:
    right = write(
        files["dir"], "right.txt", "<think>double it</think>\n```python\nprint(2*int(input()))\n```"
    )
    result = score(cli_env, files, right)
    assert result["verdicts"] == ["accepted"] * 4
    assert (result["total"], result["correctness"], result["pass_rate"]) == (1.0, 1.0, 1.0)
    assert result["format"] == 0.0 and result["validation"] == 1.0

    # n*n is right for 2 and 0 only: p = 0.5 = prev_best, so r becomes -0.1 (METHOD.md)
    square = write(
        files["dir"],
        "square.txt",
        "<think>square it</think>\n```python\nn=int(input())\nprint(n*n)\n```",
    )
    result = score(cli_env, files, square, "--prev-best", "0.5")
    assert result["verdicts"] == ["accepted", "wrong_answer", "accepted", "wrong_answer"]
    assert result["pass_rate"] == 0.5 and result["correctness"] == 0.2
    assert result["improvement"] == pytest.approx(-0.1 - 0.2)  # p = b: r becomes -0.1
    assert result["total"] == pytest.approx(-0.1 + result["format"])
    assert result["format"] > 0  # short thinking, r < 0: the tanh term

    none = write(files["dir"], "none.txt", "I cannot solve this.")
    result = score(cli_env, files, none)
    assert (result["total"], result["no_code"], result["verdicts"]) == (-1.0, True, [])


def test_bad_input_exits_2_with_a_message(cli_env: dict[str, str], files: dict[str, Path]) -> None:
    response = write(files["dir"], "r.txt", "```python\nprint(1)\n```\n")
    bad_tests = write(files["dir"], "bad.json", '[{"stdin": 1}]')
    cases = [
        (["--tests", str(bad_tests)], "not a JSON list of tests"),
        (["--tests", str(files["dir"] / "missing.json")], "cannot read"),
        (["--tokenizer", str(files["dir"])], "no tokenizer.json"),
        (["--prev-best", "1.5"], "prev-best"),
    ]
    for extra, message in cases:
        args = [
            "--response",
            str(response),
            "--tests",
            str(files["tests"]),
            "--tokenizer",
            str(files["policy"]),
            *extra,
        ]
        done = cobalt(cli_env, "reward", "score", *args)
        assert done.returncode == 2, (extra, done.stderr)
        assert message in done.stderr, (extra, done.stderr)
    no_tokenizer = cobalt(
        cli_env, "reward", "score", "--response", str(response), "--tests", str(files["tests"])
    )
    assert no_tokenizer.returncode == 2 and "COBALT_POLICY_TOKENIZER" in no_tokenizer.stderr
