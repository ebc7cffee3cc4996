"""Moving a batch to a device keeps its container types (checked on the 'meta' device)."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict, defaultdict, namedtuple
from typing import Any

import torch

from scramjet.runtime.devices import move_to_device

Pair = namedtuple("Pair", ["inputs", "targets"])


@dataclasses.dataclass
class Batch:
    images: torch.Tensor
    labels: torch.Tensor
    names: list[str]
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class FrozenBatch:
    x: torch.Tensor
    count: int


def _devices(obj: Any) -> set[str]:
    if isinstance(obj, torch.Tensor):
        return {obj.device.type}
    if isinstance(obj, dict):
        return set().union(*(_devices(v) for v in obj.values()))
    if isinstance(obj, list | tuple):
        return set().union(*(_devices(v) for v in obj))
    if dataclasses.is_dataclass(obj):
        return set().union(*(_devices(getattr(obj, f.name)) for f in dataclasses.fields(obj)))
    return set()


def test_nested_containers_keep_their_types() -> None:
    batch = {
        "pair": Pair(torch.ones(2), torch.zeros(2)),
        "tuple": (torch.ones(1), 3, "text"),
        "list": [torch.ones(1), [torch.ones(2)]],
        "ordered": OrderedDict(a=torch.ones(1)),
        "dc": Batch(torch.ones(2, 3), torch.zeros(2), ["a", "b"], {"w": torch.ones(1)}),
        "frozen": FrozenBatch(torch.ones(1), 4),
        "none": None,
    }
    moved = move_to_device(batch, "meta")
    assert type(moved) is dict and moved.keys() == batch.keys()
    assert type(moved["pair"]) is Pair and moved["pair"].inputs.device.type == "meta"
    assert type(moved["tuple"]) is tuple and moved["tuple"][1:] == (3, "text")
    assert type(moved["list"]) is list and type(moved["list"][1]) is list
    assert type(moved["ordered"]) is OrderedDict
    assert type(moved["dc"]) is Batch and moved["dc"].names == ["a", "b"]
    assert moved["dc"].images.shape == (2, 3)
    assert type(moved["frozen"]) is FrozenBatch and moved["frozen"].count == 4
    assert moved["none"] is None
    assert _devices(moved) == {"meta"}
    assert _devices(batch) == {"cpu"}, "the input is not modified"


def test_defaultdict_keeps_its_factory() -> None:
    d: defaultdict[str, list[torch.Tensor]] = defaultdict(list, x=[torch.ones(1)])
    moved = move_to_device(d, torch.device("meta"))
    assert isinstance(moved, defaultdict) and moved.default_factory is list
    assert moved["x"][0].device.type == "meta"


def test_cpu_to_cpu_returns_equal_values() -> None:
    t = torch.arange(4)
    moved = move_to_device((t, {"k": t}), "cpu")
    assert torch.equal(moved[0], t) and torch.equal(moved[1]["k"], t)
