"""Prompt templates: loading, hashing, checking and rendering."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from cobalt.orchestrator.rollouts.prompts import (
    BUNDLED_TEMPLATES_DIR,
    NO_PUBLIC_TESTS,
    FailedTestReport,
    PromptTemplate,
    TemplateError,
    bundled_template_names,
)
from cobalt.shared.contracts import CallTest, ProblemRow, TestStyle
from cobalt.shared.errors import InvalidInput

DEFAULT_SOURCE = (BUNDLED_TEMPLATES_DIR / "default.toml").read_text(encoding="utf-8")
STDIN_PROBLEM = ProblemRow(external_id="p", statement="  Print twice n.  ")
CALL_PROBLEM = ProblemRow(
    external_id="q",
    statement="Add two numbers.",
    test_style=TestStyle.CALL,
    fn_name="add",
    starter_code="\nclass Solution:\n    def add(self, a, b):\n        pass\n\n",
)
REPORT = FailedTestReport(
    verdict="wrong answer",
    input="5",
    output="11",
    expected="10",
    error="(empty)",
    is_wrong_output=True,
)


def variant(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the default template with one edit (which must apply)."""
    assert old in DEFAULT_SOURCE
    path = tmp_path / "variant.toml"
    path.write_text(DEFAULT_SOURCE.replace(old, new, 1), encoding="utf-8")
    return path


def test_bundled_templates_ship_with_the_package() -> None:
    assert {"default", "reasoning"} <= set(bundled_template_names())


@pytest.mark.parametrize("name", bundled_template_names())
def test_every_bundled_template_renders_every_message(name: str) -> None:
    template = PromptTemplate.load(name)
    rendered = [
        *template.initial_messages(STDIN_PROBLEM),
        *template.initial_messages(CALL_PROBLEM),
        {"role": "user", "content": template.feedback_message(REPORT)},
        {"role": "user", "content": template.all_passed},
        {"role": "user", "content": template.no_code},
    ]
    for message in rendered:
        assert message["content"] and message["content"] == message["content"].strip()
        assert "{" not in message["content"] and "\x00" not in message["content"]
        assert "\n\n\n" not in message["content"]


def test_a_template_is_hashed_over_its_file_bytes(tmp_path: Path) -> None:
    template = PromptTemplate.load("default")
    raw = (BUNDLED_TEMPLATES_DIR / "default.toml").read_bytes()
    assert template.sha256 == hashlib.sha256(raw).hexdigest()
    assert template.name == "default" and template.path == BUNDLED_TEMPLATES_DIR / "default.toml"
    copy = tmp_path / "mine.toml"
    copy.write_bytes(raw + b"\n")
    by_path = PromptTemplate.load(str(copy))
    assert by_path.sha256 != template.sha256 and by_path.name == str(copy)
    assert by_path.all_passed == template.all_passed
    assert PromptTemplate.load(copy).sha256 == by_path.sha256


def test_the_first_turn_for_a_stdin_problem() -> None:
    system, user = PromptTemplate.load("default").initial_messages(STDIN_PROBLEM)
    assert system["role"] == "system" and "```python" in system["content"]
    assert user["role"] == "user" and user["content"].startswith("Print twice n.\n\n")
    assert "standard input" in user["content"] and "Begin from this code" not in user["content"]


def test_the_first_turn_for_a_call_problem_names_the_function_and_shows_starter_code() -> None:
    _, user = PromptTemplate.load("default").initial_messages(CALL_PROBLEM)
    assert "`add`" in user["content"] and "standard input" not in user["content"]
    assert user["content"].endswith(
        "```python\nclass Solution:\n    def add(self, a, b):\n        pass\n```"
    )


def test_a_call_problem_without_fn_name_takes_it_from_its_tests() -> None:
    from_tests = CALL_PROBLEM.model_copy(
        update={
            "fn_name": None,
            "hidden_tests": [CallTest(fn_name="plus", args=[1, 2], expected=3)],
        }
    )
    _, user = PromptTemplate.load("default").initial_messages(from_tests)
    assert "`plus`" in user["content"]
    nameless = CALL_PROBLEM.model_copy(update={"fn_name": None})
    with pytest.raises(InvalidInput, match="names no function"):
        PromptTemplate.load("default").initial_messages(nameless)


def test_a_template_without_system_message_starts_with_the_user() -> None:
    messages = PromptTemplate.load("reasoning").initial_messages(STDIN_PROBLEM)
    assert [message["role"] for message in messages] == ["user"]


def test_feedback_messages_pick_the_layout_and_apply_the_wrapper() -> None:
    template = PromptTemplate.load("default")
    wrong = template.feedback_message(REPORT)
    assert "Expected output:\n10" in wrong and "Error output" not in wrong
    assert wrong.endswith("single ```python code block.")
    crash = FailedTestReport(
        verdict="runtime error (exit code 1)",
        input="5",
        output="(empty)",
        expected="10",
        error="ValueError: bad",
        is_wrong_output=False,
    )
    error = template.feedback_message(crash)
    assert "Error output:\nValueError: bad" in error and "Expected output" not in error


def test_the_no_public_tests_message_is_the_templates_or_one_that_claims_no_pass(
    tmp_path: Path,
) -> None:
    for name in bundled_template_names():
        untested = PromptTemplate.load(name).no_public_tests
        assert untested == NO_PUBLIC_TESTS and "No public test ran" in untested
        assert "passes" not in untested
    path = variant(tmp_path, "\nno_code =", '\nno_public_tests = "None ran."\nno_code =')
    assert PromptTemplate.load(path).no_public_tests == "None ran."


def test_literal_braces_are_written_doubled(tmp_path: Path) -> None:
    path = variant(tmp_path, 'no_code = """Your reply', 'no_code = """{{braces}} Your reply')
    assert PromptTemplate.load(path).no_code.startswith("{braces} Your reply")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('user = """{statement}', 'user = """{statment}', r"unknown placeholder\(s\) \{statment\}"),
        ('user = """{statement}', 'user = """the task', r"'first_turn.user' must contain \{stat"),
        ('wrapper = """{report}', 'wrapper = """', r"'feedback.wrapper' must contain \{report\}"),
        ("Input:\n{input}", "Input:\n{input[0]}", r"unknown placeholder\(s\) \{input\[0\]\}"),
        ("Input:\n{input}", "Input:\n{", "not a valid format string"),
        ("\nno_code =", "\nno_cod =", r"unknown key\(s\) feedback.no_cod"),
        ('\nsystem = """', '\nsystm = """', r"unknown key\(s\) systm"),
        ("[feedback]", "[feedback", "not valid UTF-8 TOML"),
    ],
)
def test_broken_templates_are_refused_with_the_reason(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    with pytest.raises(TemplateError, match=message):
        PromptTemplate.load(variant(tmp_path, old, new))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('system = 1\n[first_turn]\nuser = "{statement}"', "'system' must be a non-empty string"),
        ("", "missing the key 'first_turn.user'"),
        (
            DEFAULT_SOURCE[: DEFAULT_SOURCE.index("# The answer had no code block")],
            "'feedback.no_code'",
        ),
    ],
)
def test_wrong_value_types_and_missing_keys(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(TemplateError, match=message):
        PromptTemplate.load(path)


def test_an_empty_required_message_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "blank.toml"
    start = DEFAULT_SOURCE.index('no_code = """')
    path.write_text(DEFAULT_SOURCE[:start] + 'no_code = "   "\n', encoding="utf-8")
    with pytest.raises(TemplateError, match="'feedback.no_code' must be a non-empty string"):
        PromptTemplate.load(path)


def test_missing_templates_name_the_bundled_ones(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="bundled: brief, default, reasoning"):
        PromptTemplate.load("no-such-template")
    with pytest.raises(TemplateError, match="cannot be read"):
        PromptTemplate.load(tmp_path / "absent.toml")
    with pytest.raises(TemplateError, match="neither a bundled template name"):
        PromptTemplate.load("two words")
    assert issubclass(TemplateError, InvalidInput)
