"""``gather_object`` and ``broadcast_object`` of :mod:`scramjet.runtime.distributed`.

Each object is pickled here and travels as bytes, which every rank can read; each rank
then unpickles the others' bytes itself. An object can pickle on its rank and still fail
to load on another (a class defined in one rank's ``__main__`` only, a ``__reduce__``
whose loader raises): one all-reduce of a flag per call tells every rank, so every rank
raises the same error naming the rank whose object could not be read, instead of one
rank raising while the others return or wait in their next collective.
"""

from __future__ import annotations

import pickle
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from scramjet.runtime._dist_checks import InputFailed, raise_for_ranks

T = TypeVar("T")


def _dumps(obj: object) -> bytes:
    """``obj`` pickled, or an :class:`InputFailed` pickled in its place when it cannot be."""
    try:
        return pickle.dumps(obj)
    except Exception as error:  # any failure is this rank's: sent as such
        return pickle.dumps(InputFailed(error))


def _loads(blobs: dict[int, bytes]) -> tuple[dict[int, Any], dict[int, str]]:
    """Each source rank's object read back, and why it could not be where it could not."""
    values: dict[int, Any] = {}
    failures: dict[int, str] = {}
    for source, blob in blobs.items():
        try:
            values[source] = pickle.loads(blob)
        except Exception as error:  # anything a loader raises
            failures[source] = f"{type(error).__name__}: {error}"
    return values, failures


def _agree_on_loads(op: str, failures: dict[int, str]) -> None:
    """Raise the same ValueError on every rank when any rank could not read an object."""
    flag = torch.tensor([int(bool(failures))], dtype=torch.long)
    if dist.get_backend() == "nccl":
        flag = flag.cuda()
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    if not int(flag.item()):
        return
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, failures)
    details = "; ".join(
        f"rank {source}'s object could not be read on rank {reader} ({why})"
        for reader, seen in enumerate(out)
        for source, why in sorted(seen.items())
    )
    raise ValueError(
        f"{op}: {details}. Every rank must be able to unpickle every rank's object: define "
        f"its class at module level in a module every rank imports (not only on some ranks), "
        f"or send plain data (dicts, lists, numbers, strings). Every rank raises this error."
    )


def _raise_input_failed(op: str, values: dict[int, Any], world: int) -> None:
    """Raise on every rank alike when a rank's object could not be pickled on that rank."""
    failed = {r: v for r, v in values.items() if isinstance(v, InputFailed)}
    if failed:
        problems = [failed[r].message if r in failed else None for r in range(world)]
        kinds = [failed[r].kind if r in failed else "" for r in range(world)]
        raise_for_ranks(op, problems, kinds)


def gather_object_impl(obj: T) -> list[T]:
    """:func:`scramjet.runtime.distributed.gather_object` in a process group."""
    world = dist.get_world_size()
    blobs: list[Any] = [None] * world
    dist.all_gather_object(blobs, _dumps(obj))  # bytes: every rank can read them
    values, failures = _loads(dict(enumerate(blobs)))
    _raise_input_failed("gather_object", values, world)
    _agree_on_loads("gather_object", failures)
    return [values[r] for r in range(world)]


def broadcast_object_impl(obj: T, src: int) -> T:
    """:func:`scramjet.runtime.distributed.broadcast_object` in a process group."""
    rank, world = dist.get_rank(), dist.get_world_size()
    box: list[Any] = [_dumps(obj) if rank == src else None]
    dist.broadcast_object_list(box, src=src)  # bytes: every rank can read them
    values, failures = _loads({src: box[0]})
    _raise_input_failed("broadcast_object", values, world)
    _agree_on_loads("broadcast_object", failures)
    return obj if rank == src else values[src]
