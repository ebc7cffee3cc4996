"""Devices: default device, moving nested batches, GPU choice as a pure function."""

from __future__ import annotations

import dataclasses
import importlib.util
from collections import OrderedDict, defaultdict, namedtuple

import numpy as np
import pytest
import torch

from scramjet.runtime import (
    GpuInfo,
    NoGpuAvailableError,
    choose_gpus,
    default_device,
    move_to_device,
    query_gpus,
    select_gpus,
)

Pair = namedtuple("Pair", ["x", "y"])


@dataclasses.dataclass(frozen=True)
class Batch:
    inputs: torch.Tensor
    meta: dict[str, object]
    derived: int = dataclasses.field(init=False, default=7)


def test_default_device_on_this_machine() -> None:
    device = default_device()
    if torch.cuda.is_available():
        assert device.type == "cuda"
    elif torch.backends.mps.is_available():
        assert device.type == "mps"
    else:
        assert device == torch.device("cpu")


def test_move_to_device_keeps_every_container_type() -> None:
    calls: list[torch.device] = []

    class Recording(torch.Tensor):
        def to(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            calls.append(torch.device(args[0]))
            return super().to(*args, **kwargs)

    t = torch.arange(3).as_subclass(Recording)
    counts: defaultdict[str, list[int]] = defaultdict(list, {"a": [1]})
    batch = {
        "pair": Pair(t, [t, (t, "label")]),
        "ordered": OrderedDict(z=t),
        "counts": counts,
        "dc": Batch(t, {"ids": t, "name": "n"}),
        "array": np.ones(2),
        "none": None,
    }
    moved = move_to_device(batch, "cpu")
    assert len(calls) == 6  # every tensor, however deep, went through .to()
    assert isinstance(moved["pair"], Pair) and isinstance(moved["pair"].y[1], tuple)
    assert moved["pair"].y[1][1] == "label"
    assert type(moved["ordered"]) is OrderedDict
    assert isinstance(moved["counts"], defaultdict) and moved["counts"]["new"] == []
    assert isinstance(moved["dc"], Batch) and moved["dc"].derived == 7
    assert moved["dc"] is not batch["dc"] and moved["dc"].meta["name"] == "n"
    assert moved["array"] is batch["array"] and moved["none"] is None


def test_move_to_device_moves_to_meta_device() -> None:
    # The meta device exists everywhere, so this checks a real device change without a GPU.
    moved = move_to_device({"x": [torch.ones(2)], "y": Pair(torch.zeros(1), 3)}, "meta")
    assert moved["x"][0].device.type == "meta" and moved["y"].x.device.type == "meta"
    assert moved["y"].y == 3


GPUS = [(0, 1000, 16000), (1, 9000, 16000), (2, 9000, 16000), (3, 200, 16000)]


def test_choose_gpus_picks_freest_first() -> None:
    assert choose_gpus(GPUS, 1) == [1]
    assert choose_gpus(GPUS, 3) == [1, 2, 0]
    assert choose_gpus(GPUS, 2, least_mem_mib=500, available=[0, 2, 3]) == [2, 0]
    assert choose_gpus([GpuInfo(5, 10, 20, "X")], 1) == [5]


def test_choose_gpus_explains_a_shortage() -> None:
    with pytest.raises(NoGpuAvailableError) as info:
        choose_gpus(GPUS, 2, least_mem_mib=5000, available=[0, 1, 3])
    text = str(info.value)
    assert "asked for 2 GPU(s) with >= 5000 MiB free; found 4" in text
    assert "GPU 1: 9000/16000 MiB free (ok)" in text
    assert "GPU 2: 9000/16000 MiB free (not in `available`)" in text
    assert "GPU 3: 200/16000 MiB free (too little free memory)" in text
    with pytest.raises(NoGpuAvailableError, match="reports no GPU"):
        choose_gpus([], 1)
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        choose_gpus(GPUS, 0)


@pytest.mark.skipif(importlib.util.find_spec("pynvml") is None, reason="needs nvidia-ml-py")
def test_nvml_path_without_a_driver_raises_a_clear_error() -> None:
    import pynvml

    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        has_driver = True
    except pynvml.NVMLError:
        has_driver = False
    if has_driver:
        assert all(isinstance(g, GpuInfo) for g in query_gpus())
        return
    with pytest.raises(RuntimeError, match=r"no usable NVIDIA driver.*default_device"):
        select_gpus(1)
