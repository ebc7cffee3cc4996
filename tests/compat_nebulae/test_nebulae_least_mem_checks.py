"""GPUtil.available() and Engine() say what is wrong with a least_mem that is no MiB count."""

from __future__ import annotations

import math

import pytest

from scramjet.compat.nebulae import Engine, GPUtil
from scramjet.runtime.devices import GpuInfo


def _one_gpu() -> list[GpuInfo]:
    return [GpuInfo(0, 9000, 10000, "test-gpu")]


@pytest.mark.parametrize("least_mem", ["2048", "2GB", None, True, math.nan, -1])
def test_gputil_available_names_a_bad_least_mem(least_mem: object) -> None:
    with pytest.raises((TypeError, ValueError)) as info:
        GPUtil(reader=_one_gpu).available(1, least_mem)  # type: ignore[arg-type]
    message = str(info.value)
    assert message.startswith("least_mem must be"), message
    assert repr(least_mem) in message, message
    assert "MiB" in message and "e.g." in message, message


@pytest.mark.parametrize("least_mem", ["2GB", None, math.nan, -5])
def test_engine_names_a_bad_least_mem(least_mem: object) -> None:
    with pytest.raises((TypeError, ValueError)) as info:
        Engine(device="CPU", least_mem=least_mem)  # type: ignore[arg-type]
    assert str(info.value).startswith("least_mem must be"), str(info.value)
    assert repr(least_mem) in str(info.value)


def test_a_number_of_mib_is_still_taken() -> None:
    assert len(GPUtil(reader=_one_gpu).available(1, 8999.5)) == 1
    assert GPUtil(reader=_one_gpu).available(1, 9001) == []
    assert Engine(device="CPU", least_mem=1024).least_mem == 1024
