"""Tables on stdout (cobalt.shared.tables): tab-separated for programs, and at a terminal
of 120 columns no one-word cell (an id) is ever cut short."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table

from cobalt.shared.tables import TABLE_FORMAT_VARIABLE, print_table

HEADERS = (
    "problem", "difficulty", "outcome", "samples", "turns", "pass turn 0 [95%]",
    "pass last [95%]", "public last", "reward", "flagged", "failed",
)  # fmt: skip
"""`cobalt run show ID --problems`, the table issue 49 saw cut to `HumanEva…`."""


def problems_table(ids: list[str]) -> Table:
    table = Table(*HEADERS, title="run 4: 164 problems (hidden tests)")
    for problem in ids:
        table.add_row(problem, "-", "within_noise", "2", "3", "0.500 [0.095, 0.905]",
                      "1.000 [0.342, 1.000]", "1.000", "+0.100", "0", "0")  # fmt: skip
    return table


def test_piped_output_is_tab_separated_with_every_cell_whole(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(TABLE_FORMAT_VARIABLE, raising=False)  # auto: stdout is no terminal
    print_table(problems_table(["HumanEval/53", "lcb/abc [x]"]))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "# run 4: 164 problems (hidden tests)"
    assert lines[1].split("\t") == list(HEADERS)
    assert lines[2].split("\t")[0] == "HumanEval/53" and lines[2].split("\t")[5] == (
        "0.500 [0.095, 0.905]"
    )
    assert lines[3].split("\t")[0] == "lcb/abc [x]"  # text, not rich markup


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.from_regex(r"[A-Za-z]{1,12}/[0-9]{1,4}", fullmatch=True), min_size=1, max_size=5)
)
def test_at_120_columns_no_problem_id_is_cut(ids: list[str]) -> None:
    import os

    os.environ[TABLE_FORMAT_VARIABLE] = "table"
    try:
        out = io.StringIO()
        print_table(problems_table(ids), Console(file=out, width=120))
    finally:
        del os.environ[TABLE_FORMAT_VARIABLE]
    text = out.getvalue()
    assert all(problem in text for problem in ids), text
    assert all(len(line) <= 120 for line in text.splitlines())
