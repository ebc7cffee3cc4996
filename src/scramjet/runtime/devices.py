"""Choosing devices, moving batches onto them, and picking free GPUs.

GPU selection reads free memory through NVML (``nvidia-ml-py``), imported only when
:func:`query_gpus` runs. It only *reads* GPU state: it never stops, signals or
otherwise touches another process.
"""

from __future__ import annotations

import copy
import dataclasses
import numbers
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar, cast

import torch

__all__ = [
    "GpuInfo",
    "NoGpuAvailableError",
    "choose_gpus",
    "default_device",
    "move_to_device",
    "query_gpus",
    "select_gpus",
    "set_visible_gpus",
]

T = TypeVar("T")

_INSTALL_HINT = "pip install 'scramjet[gpu]'"


def default_device() -> torch.device:
    """The device this process should train on: CUDA, then Apple MPS, then CPU.

    With CUDA, the index is ``LOCAL_RANK`` (set by torchrun / ``scramjet launch``), so
    each process of a node gets its own GPU.

    Returns:
        ``cuda:<LOCAL_RANK>``, ``mps`` or ``cpu``.
    """
    if torch.cuda.is_available():
        local_rank = int(os.environ.get("LOCAL_RANK", "0") or 0)
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def move_to_device(obj: T, device: torch.device | str, non_blocking: bool = False) -> T:
    """Move every tensor inside ``obj`` to ``device``, keeping container types.

    Handles tensors, dicts (including ``OrderedDict`` and ``defaultdict``), lists,
    tuples, namedtuples and dataclass instances, nested in any way. Other values
    (numbers, strings, arrays) are returned unchanged.

    Args:
        obj: A tensor or a container of tensors (a batch).
        device: Target device.
        non_blocking: Passed to ``Tensor.to`` (useful with pinned memory on CUDA).

    Returns:
        The same structure with tensors on ``device``; containers are new objects of the
        same type, the input is not modified.
    """
    # _move rebuilds each container with its own type, so the result has obj's type.
    return cast(T, _move(obj, torch.device(device), non_blocking))


def _move(obj: Any, device: torch.device, non_blocking: bool) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=non_blocking)
    if isinstance(obj, str | bytes) or obj is None:
        return obj
    if isinstance(obj, Mapping):
        items = {k: _move(v, device, non_blocking) for k, v in obj.items()}
        if isinstance(obj, defaultdict):
            return type(obj)(obj.default_factory, items)
        try:
            return type(obj)(items)  # type: ignore[call-arg]
        except TypeError:  # a Mapping whose constructor takes something else
            return items
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(_move(v, device, non_blocking) for v in obj))
    if isinstance(obj, list | tuple):
        return type(obj)(_move(v, device, non_blocking) for v in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        # Copy then set fields, so fields with init=False and frozen classes work too.
        moved = copy.copy(obj)
        for f in dataclasses.fields(obj):
            object.__setattr__(moved, f.name, _move(getattr(obj, f.name), device, non_blocking))
        return moved
    return obj


# --------------------------------------------------------------------------- GPU selection


@dataclasses.dataclass(frozen=True)
class GpuInfo:
    """Memory of one GPU, as reported by NVML.

    Attributes:
        index: NVML device index (the number ``CUDA_VISIBLE_DEVICES`` uses by default).
        free_mib: Free memory in MiB.
        total_mib: Total memory in MiB.
        name: Device name.
    """

    index: int
    free_mib: int
    total_mib: int
    name: str = ""


class NoGpuAvailableError(RuntimeError):
    """Not enough GPUs meet the requested conditions (the message lists what was found)."""


def choose_gpus(
    gpus: Iterable[GpuInfo | tuple[int, int, int]],
    n: int,
    least_mem_mib: int = 0,
    available: Sequence[int] | None = None,
) -> list[int]:
    """Pick the ``n`` GPUs with the most free memory (pure function, no NVML).

    Args:
        gpus: Records ``(index, free_mib, total_mib[, name])``.
        n: Number of GPUs wanted (>= 1).
        least_mem_mib: Only GPUs with at least this much free memory qualify.
        available: If given, only these indices qualify.

    Returns:
        ``n`` indices, freest first (ties: lower index first).

    Raises:
        ValueError: ``n`` < 1 or ``least_mem_mib`` < 0.
        NoGpuAvailableError: Fewer than ``n`` GPUs qualify; the message lists every GPU
            found with its free memory and says why it was left out.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1 (number of GPUs wanted), got {n!r}")
    if least_mem_mib < 0:
        raise ValueError(f"least_mem_mib must be >= 0, got {least_mem_mib}")
    records = [g if isinstance(g, GpuInfo) else GpuInfo(*g) for g in gpus]
    allowed = None if available is None else set(available)
    eligible = [
        g
        for g in records
        if g.free_mib >= least_mem_mib and (allowed is None or g.index in allowed)
    ]
    eligible.sort(key=lambda g: (-g.free_mib, g.index))
    if len(eligible) < n:
        raise NoGpuAvailableError(_explain_shortage(records, n, least_mem_mib, allowed))
    return [g.index for g in eligible[:n]]


def _explain_shortage(
    records: list[GpuInfo], n: int, least_mem_mib: int, allowed: set[int] | None
) -> str:
    if not records:
        return f"asked for {n} GPU(s) but NVML reports no GPU on this machine"
    lines = [f"asked for {n} GPU(s) with >= {least_mem_mib} MiB free; found {len(records)}:"]
    for g in sorted(records, key=lambda g: g.index):
        why = "ok"
        if allowed is not None and g.index not in allowed:
            why = "not in `available`"
        elif g.free_mib < least_mem_mib:
            why = "too little free memory"
        label = f" {g.name}" if g.name else ""
        lines.append(f"  GPU {g.index}{label}: {g.free_mib}/{g.total_mib} MiB free ({why})")
    lines.append("Lower n or least_mem_mib, widen `available`, or wait for memory to free up.")
    return "\n".join(lines)


def query_gpus() -> list[GpuInfo]:
    """Read free and total memory of every NVIDIA GPU through NVML.

    Returns:
        One :class:`GpuInfo` per GPU, in NVML index order.

    Raises:
        ImportError: ``nvidia-ml-py`` is not installed (with the install command).
        RuntimeError: NVML cannot start (no NVIDIA driver on this machine).
    """
    try:
        import pynvml
    except ImportError as error:
        raise ImportError(
            f"GPU selection reads memory through NVML; install it with {_INSTALL_HINT}"
        ) from error
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        raise RuntimeError(
            f"cannot query GPUs: NVML failed to start ({error}). This machine has no usable "
            "NVIDIA driver; on a CPU-only machine use default_device() instead of select_gpus()"
        ) from error
    try:
        out = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else str(name)
            out.append(GpuInfo(index, int(mem.free) >> 20, int(mem.total) >> 20, name))
        return out
    finally:
        pynvml.nvmlShutdown()


def select_gpus(
    n: int = 1, least_mem_mib: int = 0, available: Sequence[int] | None = None
) -> list[int]:
    """Pick the ``n`` freest NVIDIA GPUs of this machine (reads NVML, changes nothing).

    Args:
        n: Number of GPUs wanted.
        least_mem_mib: Minimum free memory in MiB for a GPU to qualify.
        available: Restrict the choice to these NVML indices.

    Returns:
        Their indices, freest first. Pass them to :func:`set_visible_gpus` to restrict
        this process (and the processes it starts) to them.

    Raises:
        NoGpuAvailableError: Not enough GPUs qualify (the message lists what was found).
        ImportError, RuntimeError: See :func:`query_gpus`.
    """
    return choose_gpus(query_gpus(), n, least_mem_mib, available)


def set_visible_gpus(indices: Sequence[int]) -> str:
    """Set ``CUDA_VISIBLE_DEVICES`` to ``indices`` for this process and its children.

    Must run before CUDA is first used in this process (CUDA reads the variable once).

    Args:
        indices: GPU indices, e.g. from :func:`select_gpus`.

    Returns:
        The value written, e.g. ``"2,0"``.

    Raises:
        TypeError, ValueError: ``indices`` is not a sequence of whole numbers >= 0 (a string
            such as ``"0,1"`` included).
        RuntimeError: CUDA is already initialised here, so the change would be ignored.
    """
    # torch.cuda.is_initialized is unannotated; it returns a bool.
    cuda_initialized = cast("Callable[[], bool]", torch.cuda.is_initialized)
    if cuda_initialized():
        raise RuntimeError(
            "CUDA is already initialised in this process, so CUDA_VISIBLE_DEVICES would be "
            "ignored; call set_visible_gpus() before any tensor is moved to a GPU"
        )
    value = ",".join(str(i) for i in _gpu_indices(indices))
    os.environ["CUDA_VISIBLE_DEVICES"] = value
    return value


def _gpu_indices(indices: Any) -> list[int]:
    """``indices`` as a list of GPU indices >= 0 (TypeError / ValueError otherwise)."""
    if isinstance(indices, str | bytes) or not isinstance(indices, Iterable):
        raise TypeError(
            f"set_visible_gpus takes a list of GPU indices such as [0, 2]; received "
            f"{type(indices).__name__} {indices!r}. Pass select_gpus()'s result, or e.g. "
            f"[int(i) for i in text.split(',')] for a comma-separated string."
        )
    out = list(indices)
    for index in out:
        if isinstance(index, bool) or not isinstance(index, numbers.Integral):
            raise TypeError(
                f"set_visible_gpus takes whole GPU indices; received {index!r} "
                f"({type(index).__name__}) in {out!r}."
            )
        if index < 0:
            raise ValueError(
                f"set_visible_gpus takes GPU indices >= 0; received {index} in {out!r} (CUDA "
                f"hides every GPU from a negative index on). To hide all GPUs pass []."
            )
    return [int(i) for i in out]
