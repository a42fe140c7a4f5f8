"""`cobalt.shared.reward`'s public names: complete, sorted, importable."""

from __future__ import annotations

import cobalt.shared.reward as reward


def test_all_is_sorted_and_names_every_public_class_and_function() -> None:
    exported = list(reward.__all__)
    assert exported == sorted(exported)
    assert all(hasattr(reward, name) for name in exported)
    public = {
        name
        for name, value in vars(reward).items()
        if not name.startswith("_") and (isinstance(value, type) or callable(value))
    }
    assert public - {"repetition", "rules", "tokens"} <= set(exported)
