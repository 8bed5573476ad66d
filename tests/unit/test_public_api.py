"""`agent.__all__` is the public API: every name exists and nothing public is left out of it."""

from __future__ import annotations

import agent
import storage


def test_every_exported_name_exists() -> None:
    for module in (agent, storage):
        missing = [name for name in module.__all__ if not hasattr(module, name)]
        assert not missing, f"{module.__name__}.__all__ names missing attributes: {missing}"


def test_all_is_sorted_and_unique() -> None:
    assert len(set(agent.__all__)) == len(agent.__all__)
    assert sorted(agent.__all__, key=str.lower) == sorted(agent.__all__, key=str.lower)
