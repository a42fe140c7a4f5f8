"""Start-up of the `cobalt` command: what `cobalt --version` and `cobalt COMMAND --help`
import, with the root that imported every sub-command first (what the single distribution
did before the split) against the root that imports only the command that runs.

Each case runs in a fresh interpreter under `python -X importtime`, once per way of
starting, per round:

- eager: every `cobalt.commands` entry point's module imported, then the command run (the
  pre-split root built its whole tree at import);
- lazy: the command run as `cobalt` runs it (only that command's module is imported).

With `--before DIR` (a checkout of an earlier commit, e.g. `git worktree add --detach DIR
e2fd291`), both are also measured with DIR's sources first on the path, so the eager root
with the command modules as they were (every heavy library at module level) is compared in
the same run with this tree's lazy root.

Import time is the sum of the top-level imports' cumulative times as `-X importtime`
reports them (the interpreter's own start-up imports, a few tens of ms, included in
every column); the best of `--rounds` rounds is shown, since other work on the machine
only ever adds to it. The last column names the heavy libraries (database, HTTP, model,
plotting) that this tree's lazy run still imported.

    .venv/bin/python bench/cli_startup.py [--rounds 3] [--commands data,run] [--before DIR]
        [--lazy-only]

`--lazy-only` measures this tree's lazy root alone (cheap enough for many rounds, whose
best comes closest to an idle machine's figure on a shared one).

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
from pathlib import Path

COMMAND_GROUP = "cobalt.commands"

LAZY = "from cobalt.shared.commands import main; main()"
EAGER = (
    "import importlib.metadata as m\n"
    f"[e.load() for e in m.entry_points(group={COMMAND_GROUP!r})]\n"
    "from cobalt.shared.commands import main; main()"
)

HEAVY = (
    "alembic", "fastapi", "httpx", "jinja2", "matplotlib", "numpy", "openai", "prometheus_client",
    "psycopg", "pyarrow", "redis", "rq", "sqlalchemy", "starlette", "tokenizers", "torch",
    "transformers", "uvicorn", "verl", "vllm",
)  # fmt: skip
"""Top-level packages a command may import only when it runs (as tests/test_cli_startup.py)."""

_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$")


@dataclass(frozen=True)
class Imports:
    """One interpreter's start-up as `-X importtime` reports it."""

    seconds: float
    heavy: frozenset[str]


def source_path(checkout: Path) -> str:
    """PYTHONPATH putting every distribution's sources of `checkout` first."""
    folders = [checkout / "shared" / "src", *sorted((checkout / "services").glob("*/src"))]
    return os.pathsep.join(str(folder) for folder in folders)


def measure(code: str, args: Sequence[str], pythonpath: str | None) -> Imports:
    """Run `python -X importtime -c CODE ARGS` and read its report from stderr."""
    env = {**os.environ, "COLUMNS": "100"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code, *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
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


def best(code: str, args: Sequence[str], rounds: int, pythonpath: str | None) -> Imports:
    runs = [measure(code, args, pythonpath) for _ in range(rounds)]
    return min(runs, key=lambda run: run.seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="Runs per case; the best counts.")
    parser.add_argument("--commands", help="Comma-separated commands (default: every one).")
    parser.add_argument("--before", type=Path, help="A checkout of an earlier commit.")
    parser.add_argument("--lazy-only", action="store_true", help="This tree's lazy root only.")
    options = parser.parse_args()
    # The root's commands: `run.sample` and the like are commands of a group (`run`).
    installed = sorted(
        point.name
        for point in importlib.metadata.entry_points(group=COMMAND_GROUP)
        if "." not in point.name
    )
    chosen = options.commands.split(",") if options.commands else installed
    cases = [["--version"], *([name, "--help"] for name in chosen)]
    before = source_path(options.before) if options.before else None

    print(f"best of {options.rounds} runs; import time in ms (python -X importtime)\n")
    if options.lazy_only:
        print("| command | lazy root ms | heavy imports |\n|---|---|---|")
        for args in cases:
            lazy = best(LAZY, args, options.rounds, None)
            heavy = ", ".join(sorted(lazy.heavy)) or "none"
            print(f"| `cobalt {' '.join(args)}` | {lazy.seconds * 1e3:.0f} | {heavy} |", flush=True)
        return
    if before is None:
        print("| command | eager root ms | lazy root ms | eager / lazy | heavy imports (lazy) |")
        print("|---|---|---|---|---|")
    else:
        print(
            "| command | before: eager root ms | before: lazy root ms | eager root ms "
            "| lazy root ms | before eager / lazy | before lazy / lazy | heavy imports (lazy) |"
        )
        print("|---|---|---|---|---|---|---|---|")
    for args in cases:
        columns = []
        if before is not None:
            columns += [best(EAGER, args, options.rounds, before)]
            columns += [best(LAZY, args, options.rounds, before)]
        eager = best(EAGER, args, options.rounds, None)
        lazy = best(LAZY, args, options.rounds, None)
        columns += [eager, lazy]
        times = " | ".join(f"{column.seconds * 1e3:.0f}" for column in columns)
        baselines = columns[:2] if before is not None else [eager]
        ratios = " | ".join(f"{column.seconds / lazy.seconds:.1f}x" for column in baselines)
        heavy = ", ".join(sorted(lazy.heavy)) or "none"
        print(f"| `cobalt {' '.join(args)}` | {times} | {ratios} | {heavy} |", flush=True)


if __name__ == "__main__":
    main()
