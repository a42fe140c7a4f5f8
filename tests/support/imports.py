"""Who imports whom, read from source (ast): the layout tests' import graphs."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping

__all__ = ["cycles", "imports_of", "runtime_imports_of"]


def imports_of(source: str, module: str) -> set[str]:
    """Every module `source` (the module named `module`) imports, relative ones resolved;
    imports inside functions count too."""
    package = module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One path per cycle found by a depth-first search (empty: the graph is a DAG)."""
    found: list[list[str]] = []
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def runtime_imports_of(source: str, module: str) -> set[str]:
    """`imports_of`, less the imports under `if TYPE_CHECKING:` (types only, never run)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = [ast.Pass()]
    return imports_of(ast.unparse(tree), module)
