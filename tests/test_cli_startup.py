"""`cobalt --version`, `cobalt COMMAND --help` and `cobalt COMMAND SUB --help` import none of
the heavy libraries their commands use when they run.

The root loads a sub-command from its entry point only when it runs, and each command
module imports its database, HTTP, model and plotting libraries inside the functions that
use them; one module-level import in a command module (or in a module it imports, such as
`cobalt.orchestrator.console`) undoes that for every command of its group. Each case runs
in the same fresh interpreter, so a library one command imports is charged to that
command. bench/cli_startup.py measures the import times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

HEAVY = (
    "alembic", "fastapi", "httpx", "jinja2", "matplotlib", "numpy", "openai", "prometheus_client",
    "psycopg", "pyarrow", "redis", "rq", "sqlalchemy", "starlette", "tokenizers", "torch",
    "transformers", "uvicorn", "verl", "vllm",
)  # fmt: skip
"""Top-level packages that only a running command may import."""

PROBE = """
import json, sys
import typer.core, typer.main
from typer._click.core import Context
from typer.testing import CliRunner
from cobalt.shared.commands import app, installed_commands

heavy = set(json.loads(sys.argv[1]))
runner = CliRunner()
report = {}

def loaded():
    return {name.split(".")[0] for name in sys.modules} & heavy

def run(*args):
    before = loaded()
    result = runner.invoke(app, list(args))
    report[" ".join(args)] = {
        "exit": result.exit_code,
        "output": result.output[:300],
        "heavy": sorted(loaded() - before),
    }

run("--version")
root = typer.main.get_command(app)
for name in sorted(installed_commands()):
    run(name, "--help")
    command = root.get_command(Context(root), name)
    if isinstance(command, typer.core.TyperGroup):
        for sub in command.list_commands(Context(command)):
            run(name, sub, "--help")
run("--help")
print(json.dumps(report))
"""


def help_imports() -> dict[str, dict[str, Any]]:
    """Per command line (`data import --help`): its exit status, output and the heavy
    packages it imported, from one fresh interpreter with no COBALT_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, dict[str, Any]] = json.loads(done.stdout)
    return report


def test_version_and_every_help_import_no_heavy_library() -> None:
    report = help_imports()

    assert report["--version"]["output"].startswith("cobalt ")
    # Every installed command and sub-command was reached, and each showed its help.
    assert {"data --help", "data import --help", "run sample --help", "worker --help"} <= set(
        report
    )
    assert {"exec run --help", "executor serve --help", "trainer serve --help"} <= set(report)
    assert {"demo --help", "up --help", "inference serve --help", "train start --help"} <= set(
        report
    )
    for line, seen in report.items():
        assert seen["exit"] == 0, (line, seen["output"])
        if line != "--version":
            assert "Usage:" in seen["output"], (line, seen["output"])
    imported = {line: seen["heavy"] for line, seen in report.items() if seen["heavy"]}
    assert imported == {}, f"heavy imports while building help: {imported}"
