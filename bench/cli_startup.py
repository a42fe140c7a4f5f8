"""Start-up of the `cobalt` command: what `cobalt --version` and `cobalt COMMAND --help`
import, with the root that imported every sub-command first (what the single distribution
did before the split) against the root that imports only the command that runs.

Each case runs in a fresh interpreter under `python -X importtime`, twice per round:

- eager: every `cobalt.commands` entry point's module imported, then the command run (the
  pre-split root built its whole tree at import);
- lazy: the command run as `cobalt` runs it (only that command's module is imported).

Import time is the sum of the top-level imports' cumulative times (what `-X importtime`
attributes to the command's start-up, interpreter start excluded); the best of `--rounds`
rounds is shown, since other work on the machine only ever adds to it. The last column
names the heavy libraries (database, HTTP, model, plotting) the lazy run still imported.

    .venv/bin/python bench/cli_startup.py [--rounds 5] [--commands data,run]

Prints a markdown table; docs/benchmarks.md keeps the figures.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

COMMAND_GROUP = "cobalt.commands"

LAZY = "from cobalt.shared.commands import main; main()"
EAGER = (
    "import importlib.metadata as m\n"
    f"[e.load() for e in m.entry_points(group={COMMAND_GROUP!r})]\n"
    "from cobalt.shared.commands import main; main()"
)

HEAVY = (
    "sqlalchemy", "alembic", "psycopg", "openai", "pyarrow", "matplotlib", "rq", "redis",
    "numpy", "tokenizers", "uvicorn", "fastapi", "httpx", "torch", "transformers", "jinja2",
)  # fmt: skip
"""Top-level packages a command may import only when it runs (tests/test_cli_startup.py)."""

_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$")


@dataclass(frozen=True)
class Imports:
    """One interpreter's start-up as `-X importtime` reports it."""

    seconds: float
    heavy: frozenset[str]


def measure(code: str, args: Sequence[str]) -> Imports:
    """Run `python -X importtime -c CODE ARGS` and read its report from stderr."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code, *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "COLUMNS": "100"},
    )
    if done.returncode != 0:
        raise SystemExit(f"`cobalt {' '.join(args)}` exited {done.returncode}:\n{done.stderr}")
    top_level = 0
    names = set()
    for line in done.stderr.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        cumulative, indent, name = int(match[2]), len(match[3]), match[4]
        if indent == 1:  # `-X importtime` indents a top-level import by one space
            top_level += cumulative
        names.add(name.split(".")[0])
    return Imports(top_level / 1e6, frozenset(names.intersection(HEAVY)))


def best(code: str, args: Sequence[str], rounds: int) -> Imports:
    runs = [measure(code, args) for _ in range(rounds)]
    return min(runs, key=lambda run: run.seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="Runs per case; the best counts.")
    parser.add_argument("--commands", help="Comma-separated commands (default: every one).")
    options = parser.parse_args()
    installed = sorted(point.name for point in importlib.metadata.entry_points(group=COMMAND_GROUP))
    chosen = options.commands.split(",") if options.commands else installed
    cases = [["--version"], *([name, "--help"] for name in chosen)]

    print(f"best of {options.rounds} runs; import time in ms (python -X importtime)\n")
    print("| command | eager root ms | lazy root ms | eager / lazy | heavy imports (lazy) |")
    print("|---|---|---|---|---|")
    for args in cases:
        eager = best(EAGER, args, options.rounds)
        lazy = best(LAZY, args, options.rounds)
        heavy = ", ".join(sorted(lazy.heavy)) or "none"
        print(
            f"| `cobalt {' '.join(args)}` | {eager.seconds * 1e3:.0f} | {lazy.seconds * 1e3:.0f} "
            f"| {eager.seconds / lazy.seconds:.1f}x | {heavy} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
