"""Comparators: the paper's stripped equality, per-line, and float-tolerant modes."""

from __future__ import annotations

import pytest

from cobalt.executor.compare import outputs_match, values_match
from cobalt.shared.contracts import Compare


@pytest.mark.parametrize(
    ("actual", "expected", "match"),
    [
        ("42\n", "42", True),
        ("  42  \n\n", "\n42", True),
        ("4 2", "42", False),
        ("1\n2 \n", "1\n2", True),  # only the whole text is stripped...
        ("1 \n2", "1\n2", False),  # ...so inner trailing spaces still count
        ("", "", True),
        ("YES", "yes", False),  # case-sensitive, unlike SandboxFusion's OJ mode
    ],
)
def test_cobalt_mode_strips_whole_output(actual: str, expected: str, match: bool) -> None:
    assert outputs_match(actual, expected, Compare.COBALT) is match


@pytest.mark.parametrize(
    ("actual", "expected", "match"),
    [
        ("1 \n2   \n\n\n", "1\n2", True),
        ("1\n\n2", "1\n2", False),  # inner blank lines are significant
        ("\n1\n2", "1\n2", False),  # leading blank lines are significant
        (" 1\n2", "1\n2", False),  # leading spaces are significant
        ("a\r\nb\r\n", "a\nb", True),
    ],
)
def test_lines_mode(actual: str, expected: str, match: bool) -> None:
    assert outputs_match(actual, expected, Compare.LINES) is match


@pytest.mark.parametrize(
    ("actual", "expected", "match"),
    [
        ("0.3333333", "0.333333333", True),  # within 1e-6 absolute
        ("1000000.5", "1000000.0", True),  # within 1e-6 relative
        ("1000002", "1000000", False),
        ("0.1", "0.1001", False),
        ("1 2 3", "1\n2\n3", True),  # tokens, any whitespace
        ("1 2", "1 2 3", False),
        ("abc 1.0", "abc 1", True),
        ("abd 1.0", "abc 1", False),
        ("nan", "nan", True),
        ("inf", "1e308", False),
    ],
)
def test_float_mode(actual: str, expected: str, match: bool) -> None:
    assert outputs_match(actual, expected, Compare.FLOAT) is match


@pytest.mark.parametrize(
    ("actual", "expected", "mode", "match"),
    [
        ([1, 2], [1, 2], Compare.COBALT, True),
        ([1, 2], [2, 1], Compare.COBALT, False),
        (True, 1, Compare.COBALT, False),  # booleans only equal booleans
        (1, True, Compare.COBALT, False),
        (1, 1.0, Compare.COBALT, True),
        (0.30000000000000004, 0.3, Compare.COBALT, False),
        (0.30000000000000004, 0.3, Compare.FLOAT, True),
        ({"a": [1.0000001]}, {"a": [1]}, Compare.FLOAT, True),
        ({"a": 1}, {"a": 1, "b": 2}, Compare.COBALT, False),
        (None, None, Compare.COBALT, True),
        (None, 0, Compare.COBALT, False),
        ("a \n", "a", Compare.COBALT, False),  # returned strings compare exactly...
        ("a \n", "a", Compare.LINES, True),  # ...unless a text comparator is chosen
        ([[1, 2], [3]], [[1, 2], [3]], Compare.LINES, True),
    ],
)
def test_values_match(actual: object, expected: object, mode: Compare, match: bool) -> None:
    assert values_match(actual, expected, mode) is match


@pytest.mark.parametrize(
    ("actual", "expected", "match"),
    [
        ("3.0\n", "3", True),
        ("1  2\t3", "1 2 3", True),
        ("1\r\n2\r\n", "1\n2", True),
        ("1\n\n2", "1\n2", False),  # a blank line in between is a line
        ("0.30000000000000004", "0.3", False),  # decimals, no tolerance
        ("nan", "nan", True),  # equal as text
        ("NaN", "nan", False),  # as decimals NaN equals nothing
        ("sNaN", "sNaN1", False),  # a signalling NaN: no exception, a failure
        ("YES 3.0", "YES 3", False),  # every token of a differing line must be a number
        ("Infinity", "inf", True),
    ],
)
def test_lcb_mode_compares_lines_then_decimals(actual: str, expected: str, match: bool) -> None:
    assert outputs_match(actual, expected, Compare.LCB) is match


@pytest.mark.parametrize(
    ("typed", "expected", "equal"),
    [
        (True, 1, True),
        (1, 1.0, True),
        (2**53 + 1, float(2**53), False),  # exact, as Python compares int and float
        ({"tuple": [1, 2]}, [1, 2], False),
        ([1, 2], [1, 2], True),
        ({"dict": [["a", 1]]}, {"a": 1}, True),
        ({"dict": [[1, 1]]}, {"1": 1}, False),
        ({"decimal": "0.5"}, 0.5, True),
        ({"fraction": [1, 3]}, 0.3333333333333333, False),
        (float("nan"), float("nan"), False),
        ({"other": "set"}, [1], False),
        (None, None, True),
        ("a", "a", True),
    ],
)
def test_python_equality_of_typed_values(typed: object, expected: object, equal: bool) -> None:
    for mode in (Compare.LCB, Compare.HUMANEVAL):
        assert values_match(typed, expected, mode) is equal
