"""Input checks of the collectives in :mod:`scramjet.runtime.distributed`.

A collective's bad input is often bad on one rank only (a tensor of another dtype, a
non-tensor, an object that cannot be pickled). Raising there alone leaves the other ranks
waiting in the collective until the timeout (minutes). These checks travel with the first
small collective every rank runs anyway, so every rank raises the same error at once.
"""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import torch
import torch.distributed as dist

P = ParamSpec("P")
R = TypeVar("R")

# Every dtype torch defines, in a fixed order: a dtype travels between ranks as its index.
_DTYPES: tuple[torch.dtype, ...] = tuple(
    sorted({v for v in vars(torch).values() if isinstance(v, torch.dtype)}, key=str)
)


class InputFailed:
    """Sent in place of an object that could not be pickled, so the other ranks learn why."""

    def __init__(self, error: BaseException) -> None:
        self.kind = "TypeError" if isinstance(error, TypeError) else "ValueError"
        self.message = f"{type(error).__name__}: {error}"


def raise_for_ranks(op: str, problems: list[str | None], kinds: list[str] | None = None) -> None:
    """Raise the same error on every rank when any rank's input was bad.

    Args:
        op: The collective's name, for the message.
        problems: Each rank's error message, None where its input was fine (alike on
            every rank).
        kinds: Each rank's error class name (``"TypeError"`` or ``"ValueError"``); the
            first failing rank's is raised. Default ValueError.
    """
    bad = [r for r, p in enumerate(problems) if p is not None]
    if not bad:
        return
    kind = (kinds or ["ValueError"] * len(problems))[bad[0]]
    details = "; ".join(f"rank {r}: {problems[r]}" for r in bad)
    ranks = ", ".join(map(str, bad))
    message = (
        f"{op}: the input of rank(s) {ranks} is not valid, so no rank ran the collective "
        f"({details}). Fix that input on those ranks; every rank raises this error."
    )
    raise (TypeError if kind == "TypeError" else ValueError)(message)


def share_problem(op: str, problem: BaseException | None, flagged: bool) -> None:
    """When ``flagged`` (some rank had a problem, learned from a collective every rank ran),
    exchange the ranks' messages and raise the same error everywhere."""
    if not flagged:
        return
    mine = None if problem is None else f"{type(problem).__name__}: {problem}"
    kind = "TypeError" if isinstance(problem, TypeError) else "ValueError"
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, (mine, kind))
    raise_for_ranks(op, [m for m, _ in out], [k for _, k in out])


def check_pad_value(dtype: torch.dtype, pad_value: float) -> None:
    """Raise a ValueError when a signed integer ``dtype`` cannot hold ``pad_value``
    exactly (NaN, a fraction, out of range); floats, bools and unsigned ones are fine."""
    if dtype.is_floating_point or dtype.is_complex or not dtype.is_signed:
        return
    info = torch.iinfo(dtype)
    if not (math.isfinite(pad_value) and float(pad_value).is_integer()) or not (
        info.min <= pad_value <= info.max
    ):
        raise ValueError(
            f"gather: pad_value={pad_value!r} cannot be stored in the tensors' dtype {dtype}; "
            f"pass a whole number from {info.min} to {info.max} (e.g. pad_value=-1), or "
            f"convert the tensors to a float dtype to pad with NaN"
        )


def check_same_kind(work: torch.Tensor, problem: BaseException | None) -> None:
    """Raise the same error on every rank when a rank's input was bad (``problem``) or the
    ranks' tensors differ in their number of dimensions or dtype (gloo would abort the
    process on the size mismatch). One all-reduce of three numbers per rank."""
    world, rank = dist.get_world_size(), dist.get_rank()
    header = torch.zeros((world, 3), dtype=torch.long, device=work.device)
    header[rank, 0] = work.dim()
    header[rank, 1] = _DTYPES.index(work.dtype) if work.dtype in _DTYPES else -1
    header[rank, 2] = problem is not None
    dist.all_reduce(header)  # all_gather of (ndim, dtype, failed) via one small sum
    share_problem("gather", problem, bool(header[:, 2].any()))
    ndims, codes = header[:, 0].tolist(), header[:, 1].tolist()
    if min(ndims) != max(ndims):
        raise ValueError(
            f"gather: the ranks' tensors have different numbers of dimensions "
            f"({ndims} by rank); every rank must pass the same kind of tensor."
        )
    if min(codes) != max(codes):
        names = ", ".join(
            f"{_DTYPES[c] if 0 <= c < len(_DTYPES) else 'unknown'} on rank {r}"
            for r, c in enumerate(codes)
        )
        raise ValueError(
            f"gather: the ranks' tensors have different dtypes ({names}); every rank must "
            f"pass the same dtype. Convert them with .to(dtype) before gathering (an empty "
            f"part made with torch.empty(0) or torch.tensor([]) is float32: give it the "
            f"others' dtype, e.g. torch.empty(0, dtype=torch.float16))."
        )


def check_same_shape_and_dtype(work: torch.Tensor, problem: BaseException | None) -> None:
    """Raise the same error on every rank when a rank's input was bad (``problem``) or the
    ranks' tensors differ in shape or dtype (gloo would abort the process, or give a rank
    wrong values and another a timeout). One all-reduce of six numbers whatever the world
    size; the ranks' shapes and dtypes travel only when they differ, for the message."""
    described = f"{work.dtype} {list(work.shape)}"
    failed = int(problem is not None)
    key = torch.tensor([failed, work.numel(), zlib.crc32(described.encode())], dtype=torch.long)
    both = torch.cat([key, -key]).to(work.device)
    dist.all_reduce(both, op=dist.ReduceOp.MAX)  # max == min on every rank: all equal
    share_problem("reduce", problem, bool(both[0] > 0))
    if torch.equal(both[:3], -both[3:]):
        return
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, described)
    ranks = ", ".join(f"{d} on rank {r}" for r, d in enumerate(out))
    raise ValueError(
        f"reduce: the ranks' tensors differ ({ranks}); every rank must pass the same shape "
        f"and dtype. Convert with .to(dtype), and give every rank the same number of "
        f"values (a Python int is int64 and a float float32: pass floats on every rank)."
    )


def as_tensor(value: object, op: str = "reduce") -> torch.Tensor:
    """``value`` as a tensor for ``op`` (``reduce``, ``reduce_async``), or a TypeError
    that says what to pass."""
    try:
        return torch.as_tensor(value)
    except (TypeError, RuntimeError, ValueError):
        raise TypeError(
            f"{op}: expected a tensor or a number, got {type(value).__name__} "
            f"({value!r:.80}); reduce each tensor of a dict or list on its own, or collect "
            "other Python objects with gather_object"
        ) from None


def explains_timeout(op: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Wrap a collective so that gloo's bare timeout (``Timed out waiting 3000ms for recv
    operation``) says which collective waited and what usually causes it."""

    def wrap(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return function(*args, **kwargs)
            except RuntimeError as error:
                # gloo: "Timed out waiting 3000ms for recv operation", or, on a pair
                # that an earlier timeout closed, "Application timeout caused pair closure"
                text = str(error).lower()
                if "timed out" not in text and "timeout" not in text:
                    raise
                rank = dist.get_rank() if dist.is_initialized() else 0
                raise RuntimeError(
                    f"{op}: rank {rank} waited past the group's timeout for the other ranks "
                    f"({error}). Usually a collective that only some ranks call (e.g. "
                    f"`if rank == 0: {op}(...)`), or a rank that is stuck, slower than the "
                    f"timeout, or finished early: every rank must call the same collectives "
                    f"in the same order. The group cannot be used after this error (later "
                    f"collectives fail at once): end the run and fix the calls."
                ) from error

        return call

    return wrap
