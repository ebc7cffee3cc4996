"""pytorch-accelerated's utilities: batch limits, EMA weights, padding, process decorators."""

from __future__ import annotations

import copy
import functools
import random
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any, TypeVar

import numpy as np
import torch
from torch import nn

from scramjet.callbacks.model import check_ema_decay
from scramjet.runtime import distributed as dist

F = TypeVar("F", bound=Callable[..., Any])

# Limits of the LimitBatches blocks being run, innermost last (read by the compat Trainer).
_ACTIVE_LIMITS: list[int] = []


def active_batch_limit() -> int | None:
    """The batch limit of the innermost :class:`LimitBatches` block, if one is running."""
    return _ACTIVE_LIMITS[-1] if _ACTIVE_LIMITS else None


class LimitBatches:
    """Within the block, every Trainer created runs at most ``num_batches`` batches per epoch.

    For quick debugging runs: the Trainer gets a ``LimitBatchesCallback`` as its first
    callback.

    Example:
        >>> with LimitBatches(2):  # doctest: +SKIP
        ...     trainer = Trainer(model, loss_func, optimizer)
    """

    def __init__(self, num_batches: int) -> None:
        if isinstance(num_batches, bool) or not isinstance(num_batches, int) or num_batches < 1:
            raise ValueError(f"num_batches must be an int ≥ 1; received {num_batches!r}.")
        self.num_batches = num_batches

    def __enter__(self) -> LimitBatches:
        _ACTIVE_LIMITS.append(self.num_batches)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _ACTIVE_LIMITS.pop()


class DataLoaderSlice:
    """The first ``slice_size`` batches of a data loader (all of them if it is shorter)."""

    def __init__(self, dl: Iterable[Any], slice_size: int) -> None:
        if slice_size < 1:
            raise ValueError(f"slice_size must be ≥ 1; received {slice_size}.")
        self.dl = dl
        self.slice_size = slice_size

    def __iter__(self) -> Iterator[Any]:
        for i, batch in enumerate(self.dl):
            if i >= self.slice_size:
                return
            yield batch

    def __len__(self) -> int:
        return min(self.slice_size, len(self.dl))  # type: ignore[arg-type]


class ModelEma(nn.Module):
    """An exponential moving average of a model's weights: ``ema = decay * ema + (1 - decay) * w``.

    As in pytorch-accelerated, floating-point buffers (batch-norm statistics) are averaged
    like the weights; other buffers (counts) are copied. ``module`` is the averaged copy, in
    evaluation mode and without gradients.

    Args:
        model: the model to average (copied now).
        decay: weight of the average at each update.
        device: where to keep the copy (the model's device by default).
    """

    def __init__(
        self, model: nn.Module, decay: float = 0.9999, device: torch.device | str | None = None
    ) -> None:
        super().__init__()
        check_ema_decay(decay)
        self.module = copy.deepcopy(model).eval()
        for p in self.module.parameters():
            p.requires_grad_(False)
        self.decay = decay
        self.device = device
        if device is not None:
            self.module.to(device)

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Fold ``model``'s current weights into the average."""
        pairs: list[tuple[torch.Tensor, torch.Tensor]] = [
            (e, m.detach().to(e.device))
            for e, m in zip(self.module.parameters(), model.parameters())
            if e.is_floating_point()
        ]
        for eb, mb in zip(self.module.buffers(), model.buffers()):
            if eb.is_floating_point():
                pairs.append((eb, mb.detach().to(eb.device)))
            else:
                eb.copy_(mb)
        if pairs:
            torch._foreach_lerp_([e for e, _ in pairs], [m for _, m in pairs], 1.0 - self.decay)

    @torch.no_grad()
    def set(self, model: nn.Module) -> None:
        """Replace the average with ``model``'s weights."""
        self.module.load_state_dict(model.state_dict())

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Call the averaged model."""
        return self.module(*args, **kwargs)


def remove_padding(padded_tensor: torch.Tensor, pad_value: Any) -> torch.Tensor:
    """Drop the rows (along dim 0) whose every element equals ``pad_value``."""
    if padded_tensor.dim() == 0:
        raise ValueError("remove_padding needs a tensor with a first (batch) dimension.")
    flat = padded_tensor.reshape(padded_tensor.shape[0], -1)
    return padded_tensor[~(flat == pad_value).all(dim=1)]


def worker_init_fn(worker_id: int) -> None:
    """Seed NumPy and ``random`` in a DataLoader worker from the worker's torch seed."""
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


def _join_processes() -> None:
    """Join the launcher's processes into a process group, as the peer's ``PartialState``
    did: the decorators synchronise also before any Trainer exists (a no-op alone)."""
    dist.init_distributed()


def world_process_zero_only(func: F) -> F:
    """Run ``func`` on the main process only (others get None); every process waits for it."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _join_processes()
        result = func(*args, **kwargs) if dist.is_main_process() else None
        dist.barrier()
        return result

    return wrapper  # type: ignore[return-value]


def local_process_zero_only(func: F) -> F:
    """Run ``func`` on the first process of each machine only (others get None); every
    process waits for it."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _join_processes()
        result = func(*args, **kwargs) if dist.get_local_rank() == 0 else None
        dist.barrier()
        return result

    return wrapper  # type: ignore[return-value]


def local_process_zero_first(func: F) -> F:
    """Run ``func`` on each machine's first process, then on the others (e.g. a download)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _join_processes()
        first = dist.get_local_rank() == 0
        if not first:
            dist.barrier()
        result = func(*args, **kwargs)
        if first:
            dist.barrier()
        return result

    return wrapper  # type: ignore[return-value]


__all__ = [
    "DataLoaderSlice",
    "LimitBatches",
    "ModelEma",
    "active_batch_limit",
    "local_process_zero_first",
    "local_process_zero_only",
    "remove_padding",
    "worker_init_fn",
    "world_process_zero_only",
]
