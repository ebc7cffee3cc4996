"""nebulae's Kit name ``GPUtil`` over :mod:`scramjet.runtime.devices`.

GPU state is read through NVML (``nvidia-ml-py``) by
:func:`scramjet.runtime.devices.query_gpus`. No command-line tool is started, and
nothing ever stops, signals or otherwise touches another process.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

from scramjet.runtime.devices import GpuInfo, NoGpuAvailableError, query_gpus

__all__ = ["GPUtil", "NoGpuAvailableError", "summarize_samples"]


def _check_least_mem(least_mem: Any) -> float:
    """``least_mem`` as a number of MiB, or an error saying what was given and what to give.

    Raises:
        TypeError: not a number (a string such as ``"2GB"``, None, a bool).
        ValueError: negative or NaN.
    """
    if isinstance(least_mem, bool) or not isinstance(least_mem, int | float):
        raise TypeError(
            f"least_mem must be a number of MiB (the free GPU memory a GPU needs); received "
            f"{type(least_mem).__name__} {least_mem!r}. Pass a number, e.g. least_mem=2048 "
            "for 2 GiB."
        )
    if math.isnan(least_mem) or least_mem < 0:
        raise ValueError(
            f"least_mem must be a number of MiB >= 0; received {least_mem!r}. Pass e.g. "
            "least_mem=2048 for 2 GiB, or least_mem=0 to take any GPU."
        )
    return float(least_mem)


def _read_gpus() -> list[GpuInfo]:
    """NVML readings, with a clear error on a machine without usable NVIDIA GPUs."""
    try:
        gpus = query_gpus()
    except ImportError as error:
        raise NoGpuAvailableError(
            "GPUtil reads GPU memory through NVML, whose Python package (nvidia-ml-py) is "
            "not installed; install it with `pip install 'scramjet[gpu]'`. On a CPU-only "
            "machine use Engine(device='CPU') and no GPUtil."
        ) from error
    except RuntimeError as error:
        raise NoGpuAvailableError(
            "GPUtil found no usable NVIDIA GPU on this machine: the NVIDIA driver cannot be "
            f"reached (NVML: {error.__cause__ or error}). On a CPU-only machine use "
            "Engine(device='CPU') and no GPUtil; GPU monitoring needs an NVIDIA driver."
        ) from error
    if not gpus:
        raise NoGpuAvailableError(
            "NVML reports no NVIDIA GPU on this machine; use Engine(device='CPU')."
        )
    return gpus


def _describe(gpu: GpuInfo) -> dict[str, Any]:
    return {
        "index": gpu.index,
        "name": gpu.name,
        "free_mib": gpu.free_mib,
        "total_mib": gpu.total_mib,
        "used_mib": gpu.total_mib - gpu.free_mib,
    }


def summarize_samples(samples: Sequence[Sequence[GpuInfo]]) -> list[dict[str, Any]]:
    """Per-GPU memory summary of monitoring samples (pure function).

    Args:
        samples: One list of :class:`GpuInfo` per reading.

    Returns:
        One dict per GPU index: ``index``, ``name``, ``total_mib``, ``samples`` (count),
        ``min_used_mib``, ``mean_used_mib``, ``max_used_mib``.

    Example:
        >>> a, b = GpuInfo(0, 900, 1000, "g"), GpuInfo(0, 700, 1000, "g")
        >>> summarize_samples([[a], [b]])[0]["mean_used_mib"]
        200.0
    """
    by_index: dict[int, list[GpuInfo]] = {}
    for reading in samples:
        for gpu in reading:
            by_index.setdefault(gpu.index, []).append(gpu)
    out = []
    for index in sorted(by_index):
        seen = by_index[index]
        used = [g.total_mib - g.free_mib for g in seen]
        out.append(
            {
                "index": index,
                "name": seen[-1].name,
                "total_mib": seen[-1].total_mib,
                "samples": len(seen),
                "min_used_mib": min(used),
                "mean_used_mib": sum(used) / len(used),
                "max_used_mib": max(used),
            }
        )
    return out


class GPUtil:
    """Find free GPUs and monitor their memory (nebulae's ``GPUtil``), read-only.

    Args:
        reader: Function returning the current GPU readings; defaults to NVML through
            :func:`scramjet.runtime.devices.query_gpus`.

    On a machine without a usable NVIDIA GPU every method raises
    :class:`~scramjet.runtime.devices.NoGpuAvailableError` saying so.
    """

    def __init__(self, reader: Callable[[], list[GpuInfo]] | None = None) -> None:
        self._reader = reader or _read_gpus
        self._samples: list[list[GpuInfo]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def available(self, ngpus: int, least_mem: int) -> list[dict[str, Any]]:
        """GPUs with at least ``least_mem`` MiB free, freest first, at most ``ngpus``.

        Args:
            ngpus: Number of GPUs wanted.
            least_mem: Minimum free memory in MiB.

        Returns:
            Dicts with ``index``, ``name``, ``free_mib``, ``total_mib``, ``used_mib``.
            When fewer GPUs qualify, the list holds as many as the machine can offer.
        """
        if isinstance(ngpus, bool) or not isinstance(ngpus, int) or ngpus < 1:
            raise ValueError(f"ngpus must be an int >= 1; received {ngpus!r}.")
        least = _check_least_mem(least_mem)
        fit = [g for g in self._reader() if g.free_mib >= least]
        fit.sort(key=lambda g: (-g.free_mib, g.index))
        return [_describe(g) for g in fit[:ngpus]]

    def monitor(self, sec: float = 5) -> None:
        """Start reading GPU memory every ``sec`` seconds in a background thread."""
        if not sec > 0:
            raise ValueError(f"sec must be > 0 seconds; received {sec!r}.")
        if self._thread is not None:
            raise RuntimeError("GPUtil is already monitoring; call status() to stop it first.")
        self._samples = [self._reader()]  # fails here, clearly, on a machine without GPUs
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._loop, args=(float(sec),), daemon=True, name="scramjet-gputil"
        )
        self._thread.start()

    def _loop(self, sec: float) -> None:
        while not self._stop.wait(sec):
            try:
                self._samples.append(self._reader())
            except Exception:  # a reading that fails is skipped, monitoring goes on
                continue

    def status(self) -> list[dict[str, Any]]:
        """Stop monitoring and return the per-GPU summary (see :func:`summarize_samples`)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if not self._samples:
            self._samples = [self._reader()]
        return summarize_samples(self._samples)
