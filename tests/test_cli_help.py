"""Help at ordinary widths: no option name is cut short (issue 49: `train start --help` at
120 columns read `--no-stop-on-p…`); a name too long for its column folds whole."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from cobalt.shared.commands import app


@pytest.mark.parametrize("width", ["120", "100"])
@pytest.mark.parametrize(
    "command", [("train", "start"), ("run", "sample"), ("run", "refine"), ("bandit", "build")]
)
def test_no_option_name_is_cut(command: tuple[str, ...], width: str) -> None:
    shown = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": width})
    assert shown.exit_code == 0, shown.output
    names = [line for line in shown.output.splitlines() if re.search(r"\s--[a-z]", line)]
    assert names and not any("…" in line for line in names), "\n".join(names)
