"""Hyperparameters that contain themselves are refused with an error that says so."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from scramjet.tracking import Experiment


@dataclasses.dataclass
class _Node:
    lr: float
    parent: Any = None


def _self_dict() -> dict[str, Any]:
    values: dict[str, Any] = {"lr": 0.1}
    values["me"] = values
    return values


def _self_list() -> dict[str, Any]:
    items: list[Any] = [1]
    items.append(items)
    return {"widths": items}


def _parent_pointer() -> dict[str, Any]:
    child = _Node(0.1)
    child.parent = _Node(0.2, parent=child)
    return {"model": child}


@pytest.mark.parametrize("make", [_self_dict, _self_list, _parent_pointer])
def test_a_cycle_in_hyperparams_is_a_value_error(make: Any, tmp_path: Path) -> None:
    """A config whose values contain themselves (a parent pointer in a dataclass) raised a
    bare ``RecursionError: maximum recursion depth exceeded`` from deep in the recording."""
    with pytest.raises(ValueError, match="contains itself") as info:
        Experiment("p", "e", root=tmp_path / "runs", hyperparams=make())
    assert "hyperparams" in str(info.value)
    assert not (tmp_path / "runs").exists()
