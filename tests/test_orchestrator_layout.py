"""The orchestrator's shape: its sub-packages import each other without a cycle, and the
domain (runs, rollouts, training) never reaches up into `worker`.

`worker/` sits on top: it alone knows RQ and "queue or run in process", and calls domain
functions that take their dependencies as arguments. CLI modules (`cli.py`) are entry
points, above everything, so they may import anything and are left out of the graph.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

from tests.support.imports import cycles, imports_of, runtime_imports_of

ROOT = Path(__file__).resolve().parents[1] / "services/orchestrator/src/cobalt/orchestrator"
PREFIX = "cobalt.orchestrator."
DOMAIN = {"runs", "rollouts", "training"}


def sub_package(module: str) -> str | None:
    """`cobalt.orchestrator.runs.jobs` -> `runs` (a top-level module is its own node)."""
    if not module.startswith(PREFIX):
        return None
    return module.removeprefix(PREFIX).split(".")[0]


def is_cli(path: Path) -> bool:
    return path.name == "cli.py"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return PREFIX + ".".join(parts)


def orchestrator_imports() -> dict[Path, set[str]]:
    return {
        path: imports_of(path.read_text(), module_name(path))
        for path in ROOT.rglob("*.py")
        if "migrations" not in path.parts
    }


def package_graph(imports: Mapping[Path, Iterable[str]]) -> dict[str, set[str]]:
    """Sub-package -> the sub-packages its non-CLI modules import."""
    graph: dict[str, set[str]] = {}
    for path, modules in imports.items():
        if is_cli(path):
            continue
        source = sub_package(module_name(path))
        assert source is not None
        targets = graph.setdefault(source, set())
        for module in modules:
            target = sub_package(module)
            if target is not None and target != source:
                targets.add(target)
    return graph


def test_no_cycle_between_orchestrator_sub_packages() -> None:
    found = cycles(package_graph(orchestrator_imports()))
    assert not found, [" -> ".join(cycle) for cycle in found]


def test_the_domain_never_imports_the_worker_outside_cli_modules() -> None:
    offenders = sorted(
        f"{path.relative_to(ROOT)} imports {module}"
        for path, modules in orchestrator_imports().items()
        if path.relative_to(ROOT).parts[0] in DOMAIN and not is_cli(path)
        for module in modules
        if sub_package(module) == "worker"
    )
    assert not offenders, offenders


def test_the_checks_see_cycles_and_every_kind_of_import() -> None:
    """The scan would catch the cycle this layout once had, and each spelling of an import."""
    assert cycles({"rollouts": {"worker"}, "worker": {"training"}, "training": {"rollouts"}})
    assert not cycles({"worker": {"runs", "training"}, "training": {"runs"}, "runs": set()})
    source = (
        "import cobalt.orchestrator.worker.queue\n"
        "from cobalt.orchestrator.worker import runtime\n"
        "from ..worker.jobs import run_problem\n"
        "def f():\n    from cobalt.orchestrator.worker.carry_out import carry_out\n"
    )
    found = {sub_package(m) for m in imports_of(source, "cobalt.orchestrator.runs.jobs")}
    assert found == {"worker"}
    assert imports_of("from . import loop\n", "cobalt.orchestrator.rollouts.jobs") >= {
        "cobalt.orchestrator.rollouts.loop"
    }


def test_no_cycle_between_the_worker_s_modules() -> None:
    """What a carrier carries is a plain value (`worker.work`), so the entry points, the
    carriers and recovery import each other one way only."""
    worker = ROOT / "worker"
    names = {module_name(path): path for path in worker.glob("*.py")}
    graph = {
        name: {m for m in runtime_imports_of(path.read_text(), name) if m in names} - {name}
        for name, path in names.items()
    }
    found = cycles(graph)
    assert not found, [" -> ".join(cycle) for cycle in found]
    assert cycles({"jobs": {"queue"}, "queue": {"jobs"}})


def test_only_the_carrier_asks_whether_there_is_a_queue() -> None:
    """`redis_url` is read in a condition in one place: `worker.carrier.queue_carrier`."""
    readers = sorted(
        {
            str(path.relative_to(ROOT))
            for path in ROOT.rglob("*.py")
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.If | ast.IfExp | ast.While | ast.BoolOp | ast.UnaryOp)
            and "redis_url" in ast.unparse(node.test if hasattr(node, "test") else node)
        }
    )
    assert readers == ["worker/carrier.py"], readers
