"""The contract modules import each other one way: no circle closed by a bottom-of-module
import or a `model_rebuild` (the training job's contracts, `contracts.training`, build on
the parameters, `contracts.training_params`, which build on `contracts.hyperparameters`)."""

from __future__ import annotations

from pathlib import Path

from tests.support.imports import cycles, runtime_imports_of

CONTRACTS = Path(__file__).resolve().parents[2] / "shared/src/cobalt/shared/contracts"
PREFIX = "cobalt.shared.contracts."


def test_no_circle_between_contract_modules() -> None:
    names = {PREFIX + path.stem: path for path in CONTRACTS.glob("*.py") if path.stem[0] != "_"}
    graph = {
        name: {m for m in runtime_imports_of(path.read_text(), name) if m in names} - {name}
        for name, path in names.items()
    }
    assert graph[PREFIX + "training"] >= {PREFIX + "training_params"}
    found = cycles(graph)
    assert not found, [" -> ".join(cycle) for cycle in found]


def test_no_contract_is_rebuilt_or_imported_at_the_bottom() -> None:
    for path in CONTRACTS.glob("*.py"):
        text = path.read_text()
        assert "model_rebuild" not in text, path.name
        assert "E402" not in text, path.name
