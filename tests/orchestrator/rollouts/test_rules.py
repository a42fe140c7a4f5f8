"""The loop's rules from METHOD.md: thinking, extraction, history cap, feedback, templates."""

from __future__ import annotations

from pathlib import Path

import pytest

from cobalt.orchestrator.rollouts.conversation import TurnRecord, next_turn_messages
from cobalt.orchestrator.rollouts.extraction import answer_part, extract_program, history_text
from cobalt.orchestrator.rollouts.feedback import FIELD_CHARS, feedback_for_first_failure
from cobalt.orchestrator.rollouts.prompts import PromptTemplate, TemplateError
from cobalt.shared.contracts import (
    CallTest,
    ExecuteResponse,
    ProblemRow,
    StdinTest,
    TestResult,
    TestStyle,
    Verdict,
)

TEMPLATE = PromptTemplate.load("default")


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("plain answer", "plain answer"),
        ("<think>a</think>middle<think>b</think>final", "final"),
        ("<think>still thinking ```python\nprint(1)\n```", ""),
        ("no opening tag</think>after", "after"),
    ],
)
def test_answer_part_is_after_the_last_think(text: str, answer: str) -> None:
    assert answer_part(text) == answer


def test_the_last_code_block_of_the_answer_is_the_program() -> None:
    text = "```python\nprint(1)\n```\nthen better:\n```py\nprint(2)\n```\nDone."
    assert extract_program(text) == "print(2)\n"
    assert extract_program("```\nx = 3\n```") == "x = 3\n"
    assert extract_program("<think>```python\nprint(1)\n```</think>no code here") is None
    assert extract_program("No code at all.") is None
    assert extract_program("cut off:\n```python\nprint(1)") is None  # unterminated
    assert extract_program("```python\n   \n```") is None


def test_history_keeps_the_end_of_a_long_answer() -> None:
    long = "<think>" + "t" * 50 + "</think>" + "x" * 7000 + "\n```python\nprint(1)\n```"
    kept = history_text(long, 6000)
    assert len(kept) == 6000 and kept.endswith("```python\nprint(1)\n```")
    assert "tttt" not in kept
    assert history_text("<think>x</think>\n short \n") == "short"


def response(*results: TestResult) -> ExecuteResponse:
    passed = sum(r.verdict == Verdict.ACCEPTED for r in results)
    return ExecuteResponse(
        results=list(results),
        passed=passed,
        total=len(results),
        pass_rate=passed / len(results),
        executor_version="t",
    )


OK = TestResult(verdict=Verdict.ACCEPTED, stdout="4\n")
TESTS = [StdinTest(stdin="2", expected_stdout="4"), StdinTest(stdin="5", expected_stdout="10")]


def test_feedback_names_the_first_failing_test_in_order() -> None:
    wrong = TestResult(verdict=Verdict.WRONG_ANSWER, stdout="11\n")
    text = feedback_for_first_failure(TEMPLATE, TESTS, "code", response(OK, wrong))
    assert "wrong answer" in text and "5" in text and "11" in text and "10" in text
    crash = TestResult(verdict=Verdict.RUNTIME_ERROR, stderr="ZeroDivisionError: boom")
    first = feedback_for_first_failure(TEMPLATE, TESTS, "code", response(crash, wrong))
    assert "ZeroDivisionError: boom" in first and "runtime error" in first
    assert "11" not in first  # only the first failure is shown


def test_feedback_for_limits_all_passed_and_no_code() -> None:
    slow = TestResult(verdict=Verdict.TIME_LIMIT)
    assert "time limit" in feedback_for_first_failure(TEMPLATE, TESTS, "c", response(slow, OK))
    assert feedback_for_first_failure(TEMPLATE, TESTS, "c", response(OK, OK)) == TEMPLATE.all_passed
    assert feedback_for_first_failure(TEMPLATE, TESTS, None, None) == TEMPLATE.no_code
    assert feedback_for_first_failure(TEMPLATE, [], "c", None) == TEMPLATE.all_passed


def test_feedback_fields_are_middle_truncated_to_400() -> None:
    tests = [StdinTest(stdin="i" * 5000, expected_stdout="e" * 5000)]
    wrong = TestResult(verdict=Verdict.WRONG_ANSWER, stdout="o" * 5000)
    text = feedback_for_first_failure(TEMPLATE, tests, "c", response(wrong))
    for letter in "ioe":
        run = max(len(part) for part in text.split() if set(part) <= {letter})
        assert run < FIELD_CHARS
    assert len(text) < 3 * FIELD_CHARS + len(TEMPLATE.failed_test) + 200


def test_call_tests_show_the_call_and_the_expected_value() -> None:
    tests = [CallTest(fn_name="add", args=[1, [2, 3]], kwargs={"k": "x"}, expected=6)]
    wrong = TestResult(verdict=Verdict.WRONG_ANSWER, stdout="5")
    text = feedback_for_first_failure(TEMPLATE, tests, "c", response(wrong))
    assert 'add(1, [2, 3], k="x")' in text and "6" in text


def test_templates_load_hash_and_render(tmp_path: Path) -> None:
    stdin_problem = ProblemRow(external_id="p", statement="Print 2n.", starter_code="")
    messages = TEMPLATE.initial_messages(stdin_problem)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "Print 2n." in messages[1]["content"] and "standard input" in messages[1]["content"]
    call_problem = ProblemRow(
        external_id="q",
        statement="Add.",
        test_style=TestStyle.CALL,
        fn_name="add",
        starter_code="def add(a, b):\n    pass\n",
    )
    call = TEMPLATE.initial_messages(call_problem)[1]["content"]
    assert "`add`" in call and "def add(a, b):" in call
    assert len(TEMPLATE.sha256) == 64
    copy = tmp_path / "mine.toml"
    copy.write_bytes(
        (
            Path(__file__).parents[3] / "services/orchestrator/rollouts/templates/default.toml"
        ).read_bytes()
        + b"\n"
    )
    assert PromptTemplate.load(str(copy)).sha256 != TEMPLATE.sha256


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("system = 1", "'system' must be a string|needs a non-empty"),
        ("first_stdin = 'x'", "needs a non-empty string"),
        ("not toml [", "not valid TOML"),
    ],
)
def test_bad_templates_are_refused(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(content)
    with pytest.raises(TemplateError, match=message):
        PromptTemplate.load(str(path))


def test_unknown_placeholder_and_missing_template(tmp_path: Path) -> None:
    source = (
        Path(__file__).parents[3] / "services/orchestrator/rollouts/templates/default.toml"
    ).read_text()
    path = tmp_path / "typo.toml"
    path.write_text(source.replace("{statement}", "{statment}"))
    with pytest.raises(TemplateError, match="statment"):
        PromptTemplate.load(str(path))
    with pytest.raises(TemplateError, match="bundled: default"):
        PromptTemplate.load("no-such-template")


def test_turn_messages_carry_stripped_answers_and_feedback() -> None:
    initial = [{"role": "user", "content": "task"}]
    turns = [
        TurnRecord(raw_response="<think>hmm</think>answer 0", feedback="fails test 1"),
        TurnRecord(raw_response="answer 1 " + "y" * 100, feedback="all passed"),
    ]
    assert next_turn_messages(initial, []) == initial
    messages = next_turn_messages(initial, turns, think_cap_chars=20)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[1]["content"] == "answer 0" and messages[2]["content"] == "fails test 1"
    assert messages[3]["content"] == "y" * 20
    assert initial == [{"role": "user", "content": "task"}]  # not mutated
