"""Process-group setup and collective helpers over ``torch.distributed``.

The environment is the one ``torchrun`` (``python -m torch.distributed.run``),
``scramjet launch`` and ``accelerate launch`` set for every process: ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``.
Every helper is a cheap no-op in a single process, so the same script runs with or
without a launcher.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import math
import os
import sys
import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, overload

import torch
import torch.distributed as dist
from torch.utils.data import Dataset, DistributedSampler

from scramjet.runtime._ddp import wrap_data_parallel
from scramjet.runtime._dist_checks import (
    as_tensor,
    check_pad_value,
    check_same_kind,
    check_same_shape_and_dtype,
    explains_timeout,
)
from scramjet.runtime._dist_objects import broadcast_object_impl, gather_object_impl

if TYPE_CHECKING:
    from torch._C._distributed_c10d import Store

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "DistEnv",
    "TIMEOUT_ENV",
    "barrier",
    "broadcast_object",
    "destroy_distributed",
    "eval_sampler",
    "gather",
    "gather_for_metrics",
    "gather_object",
    "get_local_rank",
    "get_rank",
    "get_world_size",
    "init_distributed",
    "is_distributed",
    "is_main_process",
    "read_env",
    "PendingReduce",
    "reduce",
    "reduce_async",
    "register_wrapper_owner",
    "unpad_gathered",
    "wrap_data_parallel",
]

DEFAULT_TIMEOUT_S = 300.0
TIMEOUT_ENV = "SCRAMJET_DIST_TIMEOUT"

ReduceOp = Literal["mean", "sum", "max", "min"]
T = TypeVar("T")


class WrapperOwner(Protocol):
    """Something holding a wrapper that runs collectives (the Trainer and its DDP model)."""

    def release_distributed_wrapper(self) -> None:
        """Drop the wrapper, keeping the plain model."""


# Owners of live DDP wrappers, released before the process group goes away. Weak: a
# Trainer that is gone needs no release.
_OWNERS: weakref.WeakSet[Any] = weakref.WeakSet()
_EXIT_HOOK_REGISTERED = False


@dataclass(frozen=True)
class DistEnv:
    """Where this process sits in a (possibly single-process) run.

    Attributes:
        rank: Global rank, 0 to ``world_size - 1``.
        world_size: Number of processes in the run.
        local_rank: Rank among the processes of this node (selects the GPU).
        local_world_size: Number of processes on this node.
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1


def _env_int(name: str, default: int, env: dict[str, str] | os._Environ[str]) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(
            f"environment variable {name}={raw!r} is not an integer; it is set by the "
            "launcher (torchrun / scramjet launch), unset it or fix its value"
        ) from None


def read_env(env: dict[str, str] | None = None) -> DistEnv:
    """Read rank and world size from launcher environment variables.

    Args:
        env: Mapping to read instead of ``os.environ`` (for tests).

    Returns:
        A :class:`DistEnv`; ``DistEnv()`` (rank 0 of 1) when no launcher variables are set.

    Raises:
        ValueError: A variable is not an int, or the values are inconsistent.
    """
    source = os.environ if env is None else env
    world_size = _env_int("WORLD_SIZE", 1, source)
    rank = _env_int("RANK", 0, source)
    local_rank = _env_int("LOCAL_RANK", rank, source)
    local_world_size = _env_int("LOCAL_WORLD_SIZE", world_size, source)
    if world_size < 1 or not 0 <= rank < world_size:
        unset = "" if source.get("WORLD_SIZE", "").strip() else " (WORLD_SIZE is not set)"
        raise ValueError(
            f"RANK={rank} and WORLD_SIZE={world_size}{unset} are inconsistent: expected "
            "WORLD_SIZE >= 1 and 0 <= RANK < WORLD_SIZE; start the script with torchrun or "
            "`scramjet launch`, or unset both"
        )
    if not 0 <= local_rank < max(local_world_size, 1):
        raise ValueError(f"LOCAL_RANK={local_rank} is outside LOCAL_WORLD_SIZE={local_world_size}")
    return DistEnv(rank, world_size, local_rank, local_world_size)


def _timeout_seconds(timeout: float | timedelta | None) -> float:
    source = "timeout="
    if isinstance(timeout, timedelta):
        seconds = timeout.total_seconds()
    elif timeout is not None:
        seconds = float(timeout)
    else:
        source = f"{TIMEOUT_ENV}="
        raw = os.environ.get(TIMEOUT_ENV, "")
        try:
            seconds = float(raw) if raw.strip() else DEFAULT_TIMEOUT_S
        except ValueError:
            raise ValueError(
                f"{TIMEOUT_ENV}={raw!r} is not a number of seconds (e.g. {TIMEOUT_ENV}=600)"
            ) from None
    if not 0 < seconds < math.inf:
        raise ValueError(
            f"the distributed timeout must be a finite number of seconds > 0; received "
            f"{source}{timeout if timeout is not None else os.environ.get(TIMEOUT_ENV)!r}. "
            f"It is how long a collective waits for the other ranks (default "
            f"{DEFAULT_TIMEOUT_S:g}); pass e.g. {TIMEOUT_ENV}=600 or timeout=600."
        )
    return seconds


def init_distributed(
    backend: str | None = None, timeout: float | timedelta | None = None
) -> DistEnv:
    """Create the default process group when the launcher asked for more than one process.

    Does nothing when ``WORLD_SIZE`` is 1 (or unset) or a process group already exists.

    Args:
        backend: ``"gloo"``, ``"nccl"``, ...; default ``"nccl"`` when CUDA is available,
            otherwise ``"gloo"``.
        timeout: Seconds (or a timedelta) a collective may wait for the other ranks before
            failing, so a dead or stuck rank ends the run with an error instead of a hang.
            Default: ``$SCRAMJET_DIST_TIMEOUT`` or 300 s.

    Returns:
        The :class:`DistEnv` of this process.

    Raises:
        ValueError: Bad environment or timeout values.
        RuntimeError: ``MASTER_ADDR``/``MASTER_PORT`` are missing in a multi-process run.
    """
    env = read_env()
    seconds = _timeout_seconds(timeout)
    if env.world_size == 1 or not dist.is_available() or dist.is_initialized():
        return env
    if not os.environ.get("RANK", "").strip():
        # Every process would take rank 0 and wait for the others until the timeout.
        raise RuntimeError(
            f"WORLD_SIZE={env.world_size} but RANK is not set: every process would take "
            f"rank 0, and the group would wait for the missing ranks until the timeout "
            f"({seconds:g} s). Set RANK (0 to WORLD_SIZE-1, one per process) along with "
            "WORLD_SIZE, or start the script with `scramjet launch --nproc-per-node N "
            "script.py` or torchrun, which set both."
        )
    missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(name)]
    if missing:
        raise RuntimeError(
            f"WORLD_SIZE={env.world_size} but {', '.join(missing)} is not set; start the "
            "script with `scramjet launch --nproc-per-node N script.py` or torchrun"
        )
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        # Each process drives the GPU of its local rank; NCCL needs it set before init.
        _check_gpu_per_process(env.local_rank)
        torch.cuda.set_device(env.local_rank)
    dist.init_process_group(
        backend=backend,
        rank=env.rank,
        world_size=env.world_size,
        timeout=timedelta(seconds=seconds),
        store=_round_store(env, seconds),
    )
    global _EXIT_HOOK_REGISTERED
    if not _EXIT_HOOK_REGISTERED:  # we created the group: we also end it cleanly at exit
        atexit.register(_destroy_at_exit)
        _EXIT_HOOK_REGISTERED = True
    return env


def _check_gpu_per_process(local_rank: int) -> None:
    """Name the fix when a node starts more processes than it has GPUs (CUDA's own error
    there is 'invalid device ordinal')."""
    count = torch.cuda.device_count()
    if local_rank >= count:
        raise RuntimeError(
            f"LOCAL_RANK={local_rank} but this machine has {count} CUDA device(s), and NCCL "
            f"needs a GPU of its own for every process. Start at most {count} per node "
            f"(`--nproc-per-node {count}`), or run these processes on the CPU with gloo: "
            "hide the GPUs with CUDA_VISIBLE_DEVICES= (empty) in the launch command."
        )


def _round_store(env: DistEnv, seconds: float) -> Store | None:
    """The group's store when torch elastic's agent shares its own store with the workers.

    ``torchrun`` (unless ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``) hands every round of
    workers the agent's store, keys of the rounds before included, and torch adds no
    per-round prefix. After a restart (``--max-restarts``) a worker can then read the
    address a dead worker published and fail (gloo: ``connectFullMesh ... Connection
    refused``) or wait on it. Keys under the round's restart count keep each round apart.
    With one agent (one node) every worker has the same count; with several, the counts
    of the agents can differ, so the store is left as torch builds it. None: torch's own.
    """
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    if _env_int("GROUP_WORLD_SIZE", 1, os.environ) != 1:
        if _env_int("TORCHELASTIC_MAX_RESTARTS", 0, os.environ) > 0 and env.rank == 0:
            warnings.warn(
                "torchrun --max-restarts on several nodes shares the launcher's store across "
                "restarts: a restarted group can fail with 'connectFullMesh ... Connection "
                "refused' or wait until the timeout. Start every node with the c10d "
                "rendezvous (--rdzv-backend c10d --rdzv-endpoint HOST:PORT; the static one "
                "of --master-addr/--master-port always shares it) and "
                "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 set, or with `scramjet launch "
                "--rdzv-endpoint HOST:PORT`, which sets it.",
                stacklevel=3,
            )
        return None
    restart = _env_int("TORCHELASTIC_RESTART_COUNT", 0, os.environ)
    timeout = timedelta(seconds=seconds)
    from torch._C._distributed_c10d import PrefixStore, TCPStore

    agent_store = TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        env.world_size,
        is_master=False,
        timeout=timeout,
    )
    # The same nesting torch uses for the default group, one level deeper per round.
    return PrefixStore(f"default_pg/scramjet_round_{restart}", agent_store)


def register_wrapper_owner(owner: WrapperOwner) -> None:
    """Have :func:`destroy_distributed` release ``owner``'s wrapper before the group ends.

    The Trainer registers itself when it wraps the model in DDP. A DDP model that has
    run collectives and outlives the gloo process group can abort or hang the process
    when it is freed later (at interpreter exit, for instance).
    """
    _OWNERS.add(owner)


def _release_wrappers() -> None:
    owners = list(_OWNERS)
    _OWNERS.clear()
    for owner in owners:
        owner.release_distributed_wrapper()
    del owners
    gc.collect()  # free the released wrappers (and their reducers) now, with the group alive


def destroy_distributed() -> None:
    """End the process group cleanly if one exists (safe to call always, on every rank).

    First drops the DDP wrappers of the Trainers that created them (each keeps its plain
    model, ``trainer.unwrapped_model``), frees them, then destroys the group. When
    scramjet created the group, this also runs at interpreter exit if the script never
    called it (unless the script ends on an uncaught exception).
    """
    if dist.is_available() and dist.is_initialized():
        _release_wrappers()
        dist.destroy_process_group()


def _ending_on_error() -> bool:
    if getattr(sys, "last_value", None) is not None:  # an uncaught exception in a script
        return True
    # A worker of torch's elastic launcher (scramjet.runtime.launch) whose function raised:
    # the launcher's error recorder has written this file before the process exits.
    error_file = os.environ.get("TORCHELASTIC_ERROR_FILE", "")
    return bool(error_file) and os.path.exists(error_file)


def _destroy_at_exit() -> None:
    if _ending_on_error():
        # Leave the group alone: the other ranks must not fail on a closed connection
        # before the launcher has seen this rank's error, which it then reports.
        return
    with contextlib.suppress(Exception):  # at exit, an error here must hide nothing
        destroy_distributed()


def is_distributed() -> bool:
    """True when a process group with more than one process is active."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def get_rank() -> int:
    """Global rank: from the process group if there is one, else from ``RANK`` (default 0)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return read_env().rank


def get_world_size() -> int:
    """Number of processes: from the process group, else from ``WORLD_SIZE`` (default 1)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return read_env().world_size


def get_local_rank() -> int:
    """Rank of this process on its node, from ``LOCAL_RANK`` (default 0)."""
    return read_env().local_rank


def is_main_process() -> bool:
    """True on global rank 0 (and in a single process): the one that writes files."""
    return get_rank() == 0


@explains_timeout("barrier")
def barrier() -> None:
    """Wait until every rank reaches this point (no-op in a single process)."""
    if is_distributed():
        dist.barrier()


def _comm_device() -> torch.device:
    # NCCL only moves CUDA tensors; gloo only CPU ones.
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


@explains_timeout("reduce")
def reduce(
    tensor: torch.Tensor | float, op: ReduceOp = "mean", *, check: bool = True
) -> torch.Tensor:
    """Combine a tensor over all ranks; every rank receives the result.

    Args:
        tensor: Same shape and dtype on every rank (a Python number is turned into a
            tensor: ``1`` is int64, ``1.5`` float32).
        op: ``"mean"``, ``"sum"``, ``"max"`` or ``"min"``.
        check: Check that shape and dtype agree across ranks with one small all-reduce
            of a fixed size before the values travel. ``False`` saves that collective
            where every rank builds the tensor the same way (a loop's per-step flags);
            a mismatch then aborts in gloo or leaves a rank waiting out the timeout.

    Returns:
        A new tensor on the input's device (the input is not modified). Integer and bool
        inputs give a float64 mean; complex inputs a complex mean or sum; the sum of bools is an int64 count (as ``torch.sum``
        gives), their max is "any" and their min "all". A NaN on any rank makes the max
        and min NaN, as ``torch.amax`` does. In a single process, a copy of
        the input (a bool sum as int64).

    Raises:
        ValueError: Unknown ``op``, ``"max"``/``"min"`` of complex values, or the ranks'
            tensors differ in shape or dtype (raised on every rank alike, naming each
            rank's).
        TypeError: ``tensor`` is neither a tensor nor a number (or list of numbers).
    """
    ops = {"mean": "sum", "sum": "sum", "max": "max", "min": "min"}
    problem: TypeError | ValueError | None = None
    try:  # a bad input on one rank: every rank raises (with check=True), none waits
        if op not in ops:
            raise ValueError(f"op must be one of {sorted(ops)}, got {op!r}")
        value = _promoted(as_tensor(tensor).detach(), op)
    except (TypeError, ValueError) as error:
        if not (check and is_distributed()):
            raise
        problem, value = error, torch.zeros(0)
    if not is_distributed():
        return value.clone()
    device = value.device
    work = value.to(_comm_device(), copy=True)
    if check:
        check_same_shape_and_dtype(work, problem)
    if op in ("max", "min") and work.is_floating_point():
        return _extreme_keeping_nan(work, op).to(device)
    dist.all_reduce(work, op=getattr(dist.ReduceOp, ops[op].upper()))
    if op == "mean":
        work /= dist.get_world_size()
    return work.to(device)


def _extreme_keeping_nan(work: torch.Tensor, op: str) -> torch.Tensor:
    """The max or min over ranks with a NaN on any rank kept, as ``torch.amax`` keeps it
    (gloo's max of 1.0 and NaN is 1.0 or NaN by rank order). Each value travels with a
    NaN flag in the same all-reduce: 1 for max, -1 for min, so the flag combines as any."""
    flat = work.reshape(-1)
    nan = flat.isnan().to(flat.dtype)
    both = torch.cat([flat, nan if op == "max" else -nan])
    dist.all_reduce(both, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.MIN)
    values, flags = both[: flat.numel()], both[flat.numel() :]
    return values.masked_fill(flags != 0, math.nan).reshape(work.shape)


def _promoted(value: torch.Tensor, op: str) -> torch.Tensor:
    """``value`` in the dtype its reduction is computed in: float64 for the mean of
    integers or bools, int64 for a sum of bools (a count: gloo sums bools as an OR).
    Complex values keep their dtype; they have no max or min (a ValueError)."""
    if value.is_complex():
        if op in ("max", "min"):
            raise ValueError(
                f"reduce: op {op!r} is undefined for complex values ({value.dtype}); use "
                f"'mean' or 'sum', or reduce a real part (e.g. value.abs() or value.real)"
            )
        return value
    if op == "mean" and not value.is_floating_point():
        return value.double()  # the mean of integers is not an integer
    if op == "sum" and value.dtype == torch.bool:
        return value.long()
    return value


class PendingReduce:
    """A :func:`reduce_async` on its way: :meth:`result` waits for it (once)."""

    def __init__(self, work: Any, tensor: torch.Tensor, device: torch.device, div: int) -> None:
        self._work, self._tensor, self._device, self._div = work, tensor, device, div

    def done(self) -> bool:
        """Whether the result is there (waiting would not block)."""
        return self._work is None or bool(self._work.is_completed())

    @explains_timeout("reduce_async")
    def result(self) -> torch.Tensor:
        """The combined value, on the input's device (on CUDA, without a host sync)."""
        if self._work is not None:
            self._work.wait()
            self._work = None
            if self._div != 1:
                self._tensor /= self._div
        return self._tensor.to(self._device)


def reduce_async(
    tensor: torch.Tensor | float, op: Literal["mean", "sum"] = "mean"
) -> PendingReduce:
    """Start combining a tensor over all ranks and return without waiting.

    Collective, like :func:`reduce`: every rank calls it, in the same order as its other
    collectives, and gets the dtypes :func:`reduce` gives (a float64 mean of integers,
    an int64 count for a sum of bools). Unlike :func:`reduce`, the ranks' shapes and
    dtypes are not checked (that would wait on the other ranks): pass the same on every
    rank; a rank whose input is bad raises alone, and the others wait in the collective
    until the timeout. A Python number is turned into a tensor as :func:`reduce` does.
    In a single process the result is a copy of the input.

    Raises:
        ValueError: ``op`` is not ``"mean"`` or ``"sum"`` (for ``"max"``/``"min"``, use
            :func:`reduce`).
        TypeError: ``tensor`` is neither a tensor nor a number (or list of numbers).
    """
    if op not in ("mean", "sum"):
        raise ValueError(
            f"reduce_async: op must be 'mean' or 'sum', got {op!r}; use reduce(tensor, {op!r}) "
            "for a max or min (it waits for the result)"
        )
    value = _promoted(as_tensor(tensor, "reduce_async").detach(), op)
    if not is_distributed():
        return PendingReduce(None, value.clone(), value.device, 1)
    work_tensor = value.to(_comm_device(), copy=True)
    work = dist.all_reduce(work_tensor, op=dist.ReduceOp.SUM, async_op=True)
    div = dist.get_world_size() if op == "mean" else 1
    return PendingReduce(work, work_tensor, value.device, div)


def pad_end(tensor: torch.Tensor, shape: Sequence[int], value: float) -> torch.Tensor:
    """``tensor`` padded at the end of every dimension to ``shape`` with ``value``
    (booleans and unsigned integers, which cannot hold a negative value, with 0)."""
    fill = 0 if not tensor.dtype.is_signed else value  # bool and uint8...: not signed
    out = tensor.new_full(tuple(shape), fill)
    out[tuple(slice(0, n) for n in tensor.shape)] = tensor
    return out


@explains_timeout("gather")
def gather(tensor: torch.Tensor, pad_value: float | None = None) -> torch.Tensor:
    """Concatenate a tensor from all ranks along dim 0, in rank order.

    The first dimension may differ between ranks (e.g. the last batch is smaller). The
    others must match unless ``pad_value`` is given: then each rank's part is padded at
    the end of every dimension to the largest size on any rank (sequences of different
    lengths; booleans and unsigned integers are padded with 0). A 0-d tensor counts as
    one row.

    Args:
        tensor: This rank's part.
        pad_value: the value that fills dimensions after the first where ranks differ;
            ``None`` makes such a difference an error.

    Returns:
        The concatenation ``[rank 0 rows, rank 1 rows, ...]`` on every rank, on the
        input's device. In a single process, the input (as at least 1-d).

    Raises:
        ValueError: the ranks' parts differ in their number of dimensions or dtype, or in
            a dimension after the first and ``pad_value`` is None (on every rank alike);
            or ``pad_value`` does not fit a signed integer dtype (NaN, 0.5, out of range).
        TypeError: ``tensor`` is not a tensor (use :func:`gather_object` for other values).
    """
    problem: TypeError | ValueError | None = None
    try:  # a bad input on one rank: every rank raises in check_same_kind, none waits
        value = _gather_input(tensor, pad_value)
    except (TypeError, ValueError) as error:
        if not is_distributed():
            raise
        problem, value = error, torch.zeros(0)
    if not is_distributed():
        return value
    device = value.device
    work = value.to(_comm_device())
    world, rank = dist.get_world_size(), dist.get_rank()
    check_same_kind(work, problem)
    shapes = torch.zeros((world, work.dim()), dtype=torch.long, device=work.device)
    shapes[rank] = torch.tensor(work.shape, dtype=torch.long)
    dist.all_reduce(shapes)  # all_gather of shapes via one small sum
    target = [int(n) for n in shapes.max(dim=0).values]
    ragged = bool((shapes[:, 1:] != shapes[:, 1:].max(dim=0).values).any())
    if ragged and pad_value is None:
        raise ValueError(
            f"gather: the ranks' tensors differ after the first dimension "
            f"({[list(map(int, row)) for row in shapes]} by rank). Pass pad_value=... "
            f"to pad them to the largest size, or make every rank's shape match."
        )
    if list(work.shape) != target:  # all_gather needs equal shapes: pad, then trim
        work = pad_end(work, target, 0 if pad_value is None else pad_value)
    parts = [torch.empty_like(work) for _ in range(world)]
    dist.all_gather(parts, work.contiguous())
    return torch.cat([p[: int(n)] for p, n in zip(parts, shapes[:, 0])]).to(device)


def _gather_input(tensor: torch.Tensor, pad_value: float | None) -> torch.Tensor:
    """This rank's part for :func:`gather` (at least 1-d), or the error its input earns."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(
            f"gather: expected a torch.Tensor, got {type(tensor).__name__} ({tensor!r:.80}); "
            "pass torch.as_tensor(...) for numbers, or collect other Python objects with "
            "gather_object"
        )
    value = tensor.detach()
    if pad_value is not None:
        check_pad_value(value.dtype, pad_value)
    return value.reshape(1) if value.dim() == 0 else value


@explains_timeout("gather_object")
def gather_object(obj: T) -> list[T]:
    """Collect one picklable object from every rank, in rank order.

    Args:
        obj: Any picklable value (a dict of metrics, a list of strings, ...).

    Returns:
        ``[obj from rank 0, obj from rank 1, ...]`` on every rank; ``[obj]`` in a single
        process.

    Raises:
        TypeError: a rank's object cannot be pickled (a lock, an open file).
        ValueError: a rank's object pickles but cannot be unpickled on some rank (its
            class exists on some ranks only, its loader raises). Both are raised on
            every rank alike, naming the rank.
    """
    if not is_distributed():
        return [obj]
    return gather_object_impl(obj)


@explains_timeout("broadcast_object")
def broadcast_object(obj: T, src: int = 0) -> T:
    """Send a picklable object from rank ``src`` to every rank.

    Args:
        obj: The value on ``src`` (what other ranks pass is ignored).
        src: Rank whose value wins.

    Returns:
        ``src``'s object on every rank; ``obj`` itself in a single process.

    Raises:
        ValueError: ``src`` is not a rank of the group (in a single process: not 0), or
            its object cannot be unpickled on some rank (raised on every rank alike).
        TypeError: ``src``'s object cannot be pickled (raised on every rank alike).
    """
    world = get_world_size()
    if isinstance(src, bool) or not isinstance(src, int) or not 0 <= src < world:
        raise ValueError(
            f"broadcast_object: src={src!r} is not a rank of this run; expected a rank from "
            f"0 to {world - 1} (the world size is {world}), e.g. src=0 for the main process"
        )
    if not is_distributed():
        return obj
    return broadcast_object_impl(obj, src)


@overload
def unpad_gathered(
    gathered: torch.Tensor, num_samples: int, world_size: int | None = None
) -> torch.Tensor: ...


@overload
def unpad_gathered(
    gathered: Sequence[T], num_samples: int, world_size: int | None = None
) -> list[T]: ...


def unpad_gathered(
    gathered: torch.Tensor | Sequence[Any], num_samples: int, world_size: int | None = None
) -> torch.Tensor | list[Any]:
    """Put results gathered from a non-shuffling ``DistributedSampler`` back in dataset order.

    With ``shuffle=False, drop_last=False`` the sampler pads the dataset to a multiple of
    the world size by repeating its first samples, and rank ``r`` sees indices
    ``r, r + W, r + 2W, ...``. After :func:`gather` the rows are grouped by rank. This
    interleaves them back and drops the padding: 33 samples on 2 ranks give exactly 33
    rows, row ``i`` being sample ``i``.

    Args:
        gathered: A tensor or a sequence with ``W * ceil(num_samples / W)`` rows, grouped
            by rank (as :func:`gather` / concatenated :func:`gather_object` lists return).
        num_samples: ``len(dataset)``.
        world_size: Number of ranks; default the current world size.

    Returns:
        A tensor (or list) with ``num_samples`` rows in dataset order.

    Raises:
        ValueError: The number of rows is not what such a sampler produces.
    """
    world = get_world_size() if world_size is None else world_size
    if num_samples < 0 or world < 1:
        raise ValueError(f"need num_samples >= 0 and world_size >= 1, got {num_samples}, {world}")
    per_rank = math.ceil(num_samples / world)
    if len(gathered) != per_rank * world:
        raise ValueError(
            f"got {len(gathered)} gathered rows, expected {per_rank * world} "
            f"({world} ranks x ceil({num_samples}/{world})). Use eval_sampler(dataset) "
            "(shuffle=False, drop_last=False) and gather every batch of every rank"
        )
    if isinstance(gathered, torch.Tensor):
        rest = gathered.shape[1:]
        order = gathered.reshape(world, per_rank, *rest).transpose(0, 1)
        return order.reshape(world * per_rank, *rest)[:num_samples]
    items = list(gathered)
    return [items[(i % world) * per_rank + i // world] for i in range(num_samples)]


def gather_for_metrics(tensor: torch.Tensor, num_samples: int) -> torch.Tensor:
    """:func:`gather` then :func:`unpad_gathered`: per-sample outputs in dataset order.

    Args:
        tensor: This rank's outputs for all its samples, in its sampler's order.
        num_samples: ``len(dataset)``.

    Returns:
        ``num_samples`` rows in dataset order (in a single process, the input itself,
        which must have ``num_samples`` rows).
    """
    return unpad_gathered(gather(tensor), num_samples)


def eval_sampler(
    dataset: Dataset[Any] | Sequence[Any],
    *,
    num_replicas: int | None = None,
    rank: int | None = None,
) -> DistributedSampler[Any]:
    """A ``DistributedSampler`` for evaluation and prediction: no shuffling, no dropping.

    Pair it with :func:`gather_for_metrics` to get exactly ``len(dataset)`` results in
    dataset order.

    Args:
        dataset: The evaluation dataset.
        num_replicas: World size; default the current one.
        rank: This rank; default the current one.

    Returns:
        A sampler that gives rank ``r`` the indices ``r, r + W, ...`` (padded by wrapping).
    """
    return DistributedSampler(
        dataset,  # type: ignore[arg-type]
        num_replicas=get_world_size() if num_replicas is None else num_replicas,
        rank=get_rank() if rank is None else rank,
        shuffle=False,
        drop_last=False,
    )
