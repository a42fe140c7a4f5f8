"""The store-reading commands (`cobalt run list`, `run show`, `run table`, `train list`,
`data list`, ...) import what reading the store needs and nothing of what writing runs,
serving or training needs.

Every such command starts a fresh interpreter, so each library a module imports at load
time (the HTTP clients, the reward's numpy and tokenizers, the inference contracts, the
PostgreSQL drivers on a SQLite store) is paid by every `cobalt run list`; these modules
import them inside the functions that use them instead. Each command runs against a
seeded SQLite store in one fresh interpreter, in turn, and is charged the heavy modules it
newly imported; each must succeed, so the reading code really ran. bench/store_startup.py
measures the time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cobalt.orchestrator.store.db import make_engine, make_sessionmaker, upgrade_database
from tests.ui.seed import seed

NEVER = (
    "alembic", "fastapi", "httpx", "jinja2", "matplotlib", "openai", "prometheus_client",
    "psycopg", "pyarrow", "redis", "rq", "starlette", "tokenizers", "torch", "transformers",
    "uvicorn", "vllm", "cobalt.orchestrator.api", "cobalt.orchestrator.worker",
    "cobalt.shared.clients", "cobalt.shared.contracts.inference", "cobalt.shared.reward",
)  # fmt: skip
"""Modules no store-reading command imports (a store at the newest migration: no Alembic)."""

NO_INTERVAL = ("numpy",)
"""Imported only to compute an interval (the bootstrap); a command showing none must not."""

PROBE = """
import json, sys
from typer.testing import CliRunner
from cobalt.shared.commands import app

watched = json.loads(sys.argv[1])
report = {}

def loaded():
    return {name for name in watched if name in sys.modules}

for line in json.loads(sys.argv[2]):
    before = loaded()
    result = CliRunner().invoke(app, line)
    report[" ".join(line)] = {"exit": result.exit_code, "output": result.output[-300:],
                              "new": sorted(loaded() - before)}
print(json.dumps(report))
"""


def test_store_reading_commands_import_no_heavy_module(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade_database(url)
    engine = make_engine(url)
    seeded = seed(make_sessionmaker(engine))
    engine.dispose()
    run, other, job = seeded.finished_run, seeded.trained_run, seeded.training_job
    without_interval = [
        ["run", "list"], ["run", "show", str(run)], ["run", "trajectory", str(run), "sum-two"],
        ["run", "export", str(run)], ["data", "list"], ["data", "show", "demo"],
        ["train", "list"], ["train", "show", str(job)], ["train", "metrics", str(job)],
    ]  # fmt: skip
    with_interval = [
        ["run", "show", str(run), "--problems"],
        ["run", "table", str(run), str(other)],
        ["run", "compare", str(run), str(other)],
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    env["COBALT_DATABASE_URL"] = url
    done = subprocess.run(
        [
            sys.executable, "-c", PROBE, json.dumps([*NEVER, *NO_INTERVAL]),
            json.dumps(without_interval + with_interval),
        ],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)

    assert len(report) == len(without_interval) + len(with_interval)
    for line, seen in report.items():
        assert seen["exit"] == 0, (line, seen["output"])
    imported = {line: seen["new"] for line, seen in report.items() if seen["new"]}
    allowed = {" ".join(line): list(NO_INTERVAL) for line in with_interval}
    unexpected = {
        line: [name for name in names if name not in allowed.get(line, [])]
        for line, names in imported.items()
    }
    assert {line: names for line, names in unexpected.items() if names} == {}
    # The intervals are really computed by the first command that shows one.
    assert imported.get(" ".join(with_interval[0])) == list(NO_INTERVAL)


def test_contracts_package_imports_a_contract_module_when_a_name_is_asked() -> None:
    probe = (
        "import json, sys\n"
        "import cobalt.shared.contracts as contracts\n"
        "def modules():\n"
        "    return sorted(m for m in sys.modules if m.startswith('cobalt.shared.contracts.'))\n"
        "first = modules()\n"
        "from cobalt.shared.contracts import Compare\n"
        "after = modules()\n"
        "names = {name: type(getattr(contracts, name)).__name__ for name in contracts.__all__}\n"
        "print(json.dumps({'first': first, 'after': after, 'names': names,"
        " 'dir': sorted(set(contracts.__all__) - set(dir(contracts)))}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)

    assert seen["first"] == []
    assert seen["after"] == ["cobalt.shared.contracts.executor"]
    # Every exported name resolves (from its own module), and `dir` lists them.
    assert seen["names"]["Compare"] == "EnumType"
    assert seen["names"]["ProblemRow"] == "ModelMetaclass"
    assert seen["names"]["POLICY_VERSION_HEADER"] == "str"
    assert seen["dir"] == []
    import cobalt.shared.contracts as contracts

    with pytest.raises(AttributeError, match="NoSuchContract"):
        contracts.NoSuchContract  # noqa: B018
