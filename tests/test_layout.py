"""The suite's own shape: no test imports another test module or a conftest.

Helpers that several tests use live in tests/support/ (or a non-test helper module beside
the tests), so a test file can be renamed, moved or run alone without breaking another.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent

EXEMPT = {"trainer"}
"""tests/trainer runs in .venv-trainer (its torchrun scripts import the tests they drive);
it is being reworked under issue 17 and is left to that change."""


def imported_modules(source: str, package: str) -> list[str]:
    """Every module `source` (a module of `package`) imports, relative imports resolved."""
    parts = package.split(".")
    modules = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = parts[: len(parts) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            modules.append(module)
            # `from tests.x import test_y` imports the module test_y itself.
            modules += [f"{module}.{alias.name}" for alias in node.names]
    return modules


def package_of(path: Path) -> str:
    return ".".join(path.relative_to(TESTS.parent).parent.parts)


def is_test_module(module: str) -> bool:
    last = module.rsplit(".", 1)[-1]
    return module.startswith("tests.") and (last.startswith("test_") or last == "conftest")


def test_no_test_imports_a_test_module_or_a_conftest() -> None:
    offenders = {
        f"{path.relative_to(TESTS.parent)} imports {module}"
        for path in TESTS.rglob("*.py")
        if path.relative_to(TESTS).parts[0] not in EXEMPT
        for module in imported_modules(path.read_text(), package_of(path))
        if is_test_module(module)
    }
    assert not offenders, sorted(offenders)


def test_the_check_sees_each_kind_of_import() -> None:
    """The scan catches absolute, from-package and relative imports of test modules."""
    assert is_test_module("tests.orchestrator.test_runs")
    assert is_test_module("tests.conftest")
    assert not is_test_module("tests.support.runs")
    assert not is_test_module("cobalt.orchestrator.test_helpers")
    source = (
        "import tests.orchestrator.test_runs\n"
        "from tests.orchestrator import test_api\n"
        "from .conftest import model\n"
        "from ..conftest import cli_env\n"
        "from tests.support.runs import cobalt\n"
    )
    modules = imported_modules(source, "tests.orchestrator.training")
    found = {m for m in modules if is_test_module(m)}
    assert found >= {
        "tests.orchestrator.test_runs",
        "tests.orchestrator.test_api",
        "tests.orchestrator.training.conftest",
        "tests.orchestrator.conftest",
    }
    assert not any(m.startswith("tests.support") for m in found)
