"""Only the store's lifecycle writers write a status column, and each asks the machine.

Reads the orchestrator's source: an assignment to `<x>.status`, a `.values(status=...)`
(SQL UPDATE), `setattr(x, "status", ...)` or SQL text that updates a status anywhere but
in the writers below fails this test. A new status change then has to go through
`cobalt.orchestrator.lifecycle` by calling one of those writers.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import cobalt.orchestrator

PACKAGE = Path(cobalt.orchestrator.__file__).parent

WRITERS = {
    ("store/repo_runs.py", "set_run_status"): "is_run_move",
    ("store/repo_trajectories.py", "mark_trajectory"): "is_trajectory_move",
    ("store/repo_trajectories.py", "move_trajectories"): "TRAJECTORY_TRANSITIONS",
    ("store/repo_training.py", "apply_job_event"): "job_after",
    ("store/repo_training.py", "claim_step"): "group_after",
}
"""(module, function) allowed to write a status -> the lifecycle name it must use."""

_SQL_STATUS_UPDATE = re.compile(r"\bupdate\b.+\bset\b.*\bstatus\b", re.IGNORECASE | re.DOTALL)


def _is_status_target(node: ast.expr) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "status"
    if isinstance(node, ast.Tuple | ast.List):
        return any(_is_status_target(element) for element in node.elts)
    return False


def _is_insert(chain: ast.expr) -> bool:
    """Whether a method chain starts at `insert(...)`: a row's first status, not a change."""
    while isinstance(chain, ast.Call | ast.Attribute):
        if isinstance(chain, ast.Call):
            callee = chain.func
            name = callee.id if isinstance(callee, ast.Name) else getattr(callee, "attr", "")
            if name == "insert":
                return True
            chain = callee
        else:
            chain = chain.value
    return False


def _writes_status(node: ast.AST) -> bool:
    if isinstance(node, ast.Assign):
        return any(_is_status_target(target) for target in node.targets)
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return _is_status_target(node.target)
    if isinstance(node, ast.Call):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if name == "values" and not _is_insert(node.func):
            if any(keyword.arg == "status" for keyword in node.keywords):
                return True
            return any(
                isinstance(arg, ast.Dict)
                and any(isinstance(k, ast.Constant) and k.value == "status" for k in arg.keys)
                for arg in node.args
            )
        if isinstance(node.func, ast.Name) and node.func.id == "setattr" and len(node.args) > 1:
            second = node.args[1]
            return isinstance(second, ast.Constant) and second.value == "status"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return bool(_SQL_STATUS_UPDATE.search(node.value))
    return False


def status_writes(source: str) -> list[tuple[str, int]]:
    """(enclosing function, line) of every status write in `source`."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if _writes_status(node):
            found.append((function, getattr(node, "lineno", 0)))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(source), "<module>")
    return found


def _modules() -> list[Path]:
    return sorted(
        path
        for path in PACKAGE.rglob("*.py")
        if "migrations" not in path.relative_to(PACKAGE).parts
    )


def test_status_is_written_only_by_the_lifecycle_writers() -> None:
    stray = [
        f"{path.relative_to(PACKAGE)}:{line} in {function}()"
        for path in _modules()
        for function, line in status_writes(path.read_text(encoding="utf-8"))
        if (path.relative_to(PACKAGE).as_posix(), function) not in WRITERS
    ]
    assert stray == [], (
        "status written outside the lifecycle writers; call repo_runs.set_run_status, "
        "repo_trajectories.move_trajectories / mark_trajectory or repo_training.apply_job_event "
        f"instead: {stray}"
    )


@pytest.mark.parametrize(("module", "function"), [key for key, name in WRITERS.items() if name])
def test_every_writer_asks_the_machine(module: str, function: str) -> None:
    tree = ast.parse((PACKAGE / module).read_text(encoding="utf-8"))
    (definition,) = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == function
    ]
    used = {node.id for node in ast.walk(definition) if isinstance(node, ast.Name)}
    assert WRITERS[(module, function)] in used
    assert status_writes(ast.unparse(definition)), f"{function} no longer writes a status"


@pytest.mark.parametrize(
    "source",
    [
        "def f(run):\n    run.status = 'finished'\n",
        "def f(job):\n    job.status, job.error = 'failed', 'x'\n",
        "def f(s):\n    s.execute(update(Run).where(Run.id == 1).values(status='failed'))\n",
        "def f(s):\n    s.execute(update(Run).values({'status': 'failed'}))\n",
        "def f(run):\n    setattr(run, 'status', 'failed')\n",
        "def f(s):\n    s.execute(text(\"UPDATE trajectories SET status = 'failed'\"))\n",
    ],
)
def test_the_scan_sees_every_kind_of_status_write(source: str) -> None:
    assert status_writes(source) == [("f", 2)]


def test_the_scan_leaves_reads_inserts_and_other_fields_alone() -> None:
    source = (
        "def f(run, s):\n"
        "    if run.status == 'pending':\n"
        "        run.error = None\n"
        "    s.execute(update(Turn).values(hidden_passed=True))\n"
        "    s.execute(postgresql.insert(Group).values(status='ready').returning(Group.id))\n"
        "    return {'status': run.status}\n"
    )
    assert status_writes(source) == []
