"""The shared package's public names: complete, sorted, and importable."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = ["cobalt.shared.contracts", "cobalt.shared.clients", "cobalt.shared.errors"]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_resolves(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported), f"{name}.__all__ is not sorted"
    for attribute in exported:
        assert hasattr(module, attribute), f"{name}.__all__ names missing {attribute}"


@pytest.mark.parametrize("name", ["cobalt.shared.contracts", "cobalt.shared.clients"])
def test_all_lists_every_public_class(name: str) -> None:
    module = importlib.import_module(name)
    public = {
        attr
        for attr, value in vars(module).items()
        if isinstance(value, type) and not attr.startswith("_")
    }
    assert public <= set(module.__all__)
