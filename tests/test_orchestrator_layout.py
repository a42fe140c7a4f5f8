"""The orchestrator's shape: its sub-packages import each other without a cycle, and the
domain (runs, rollouts, training) never reaches up into `worker`.

`worker/` sits on top: it alone knows RQ and "queue or run in process", and calls domain
functions that take their dependencies as arguments. A command module (`cli.py`) belongs
to its sub-package like any other module: `cobalt run sample`, which carries work out, is
written in `worker/cli.py`, not `runs/`; a group's commands written in other packages join
it by entry points (`GROUP.NAME`, the distributions' pyproject.toml), which only the root
command (`cobalt.shared.commands`) reads, so no command module imports another package's to
register it.
"""

from __future__ import annotations

import ast
import importlib
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

from tests.support.imports import cycles, imports_of, runtime_imports_of

REPOSITORY = Path(__file__).resolve().parents[1]
ROOT = REPOSITORY / "services/orchestrator/src/cobalt/orchestrator"
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


def package_graph(
    imports: Mapping[Path, Iterable[str]], *, with_cli: bool = False
) -> dict[str, set[str]]:
    """Sub-package -> the sub-packages its modules import (its command modules too only
    `with_cli`)."""
    graph: dict[str, set[str]] = {}
    for path, modules in imports.items():
        if is_cli(path) and not with_cli:
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


def test_no_cycle_between_orchestrator_sub_packages_counting_commands() -> None:
    """The command modules sit in the layers too: `results <-> runs <-> training <->
    worker` was the cycle they once closed (`runs/cli.py` queued work, `results/cli.py`
    registered commands onto `runs/cli.py`'s group).

    Every import counts: those inside functions (a command imports its store and service
    when it runs, to start fast, but depends on them all the same) and those under
    `TYPE_CHECKING` (an annotation names its module's package as much as a call does).
    """
    found = cycles(package_graph(orchestrator_imports(), with_cli=True))
    assert not found, [" -> ".join(cycle) for cycle in found]


def test_no_command_module_registers_another_s_commands() -> None:
    """A group's commands from other modules are entry points (`GROUP.NAME`), so no
    orchestrator module needs an import below its code (`# noqa: E402`) to register them."""
    offenders = sorted(
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*.py")
        if "noqa: E402" in path.read_text()
    )
    assert not offenders, offenders


def declared_commands() -> dict[str, str]:
    """Every `cobalt.commands` entry point the distributions' pyproject.toml files declare
    (this checkout's, not the installed metadata's), name -> target."""
    declared: dict[str, str] = {}
    for pyproject in [
        REPOSITORY / "shared/pyproject.toml",
        *REPOSITORY.glob("services/*/pyproject.toml"),
    ]:
        project = tomllib.loads(pyproject.read_text())["project"]
        points = project.get("entry-points", {}).get("cobalt.commands", {})
        assert not set(points) & set(declared), f"{pyproject}: a command declared twice"
        declared.update(points)
    return declared


def test_every_declared_command_names_a_command_of_a_declared_group() -> None:
    """Each entry point names a typer app or a function that exists, and a `GROUP.NAME`
    one a group that is declared and has no command of that name of its own."""
    import typer

    declared = declared_commands()
    assert {"run", "run.sample", "run.table", "train.metrics", "data.generate"} <= set(declared)
    for name, target in declared.items():
        module, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, typer.Typer) or callable(command), name
        group, dot, sub = name.partition(".")
        if dot:
            assert "." not in sub, f"{name}: a group's commands are one level deep"
            owner = declared.get(group, "").partition(":")
            app = getattr(importlib.import_module(owner[0]), owner[2]) if owner[0] else None
            assert isinstance(app, typer.Typer), f"{name}: no group {group!r} is declared"
            own = {info.name for info in app.registered_commands}
            assert sub not in own, f"{name}: {group} has a command {sub!r} of its own"


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
