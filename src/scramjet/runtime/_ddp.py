"""DDP wrapping: ``wrap_data_parallel`` (the Trainer's default ``wrap_model``) and the
buffer sync that keeps every replica's BatchNorm statistics equal to rank 0's."""

from __future__ import annotations

import contextlib
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["wrap_data_parallel"]


def wrap_data_parallel(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """``model`` wrapped for data-parallel training across the processes of this run.

    ``DistributedDataParallel`` when more than one process runs; the model itself in one
    process, when it is sharded with FSDP (``fully_shard`` shards in place and needs no
    wrapper), or when it is a ``DistributedDataParallel`` already. The Trainer's default
    ``wrap_model`` is this function.

    Buffers (BatchNorm's running statistics) are broadcast from rank 0 right *after* each
    forward that synchronises gradients, instead of before the next one as DDP does by
    default: the replicas then hold the same buffers whenever an update has been applied,
    so an evaluation, ``predict`` or a checkpoint after training uses one model on every
    rank (with DDP's default, each rank kept the statistics of its own last batch).

    Args:
        model: The module to train, already on ``device``.
        device: This process's device (a CUDA device gives DDP its ``device_ids``).

    Returns:
        The module to call in training steps.

    Raises:
        ValueError: ``model`` holds ``SyncBatchNorm`` layers and ``device`` is not a GPU
            (torch synchronises batch statistics on CUDA devices only).
    """
    from scramjet.runtime.distributed import get_world_size  # it re-exports this function
    from scramjet.runtime.fsdp import is_sharded  # fsdp imports the distributed module

    world = get_world_size()
    if world == 1 or is_sharded(model):
        return model
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        return model  # wrapped by the user already: a second wrapper would reduce twice
    _check_sync_batchnorm(model, device, world)
    device_ids = [device.index] if device.type == "cuda" else None
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
    if any(True for _ in model.buffers()):  # rank 0's buffers were copied at construction
        # DDP's own sync (before a forward that follows a synced one) is replaced by the
        # hook's (right after the synced forward). The attribute, not the constructor's
        # argument: torch 2.13 deprecates broadcast_buffers=, older versions lack its
        # replacement, and both read this attribute.
        ddp.broadcast_buffers = False
        ddp.register_forward_hook(_sync_buffers_after_forward)
    return ddp


def _sync_buffers_after_forward(module: torch.nn.Module, args: Any, output: Any) -> None:
    """Forward hook of the DDP wrapper: rank 0's buffers on every rank after a forward
    whose backward all-reduces gradients (the forwards DDP would sync buffers after)."""
    ddp = module
    if not isinstance(ddp, torch.nn.parallel.DistributedDataParallel):
        return
    if ddp.training and torch.is_grad_enabled() and ddp.require_backward_grad_sync:
        broadcast_buffers(ddp.module, ddp.process_group)


def broadcast_buffers(module: torch.nn.Module, group: Any = None) -> None:
    """Rank 0's buffers copied into every rank's ``module`` (one broadcast per dtype).

    Collective over ``group`` (default: every process); nothing to do for a module
    without buffers. The Trainer calls it after an update whose last forward ran without
    the hook's sync (a window cut short under ``no_sync``) and, for a model sharded with
    FSDP, with every update (:func:`scramjet.runtime.fsdp.sync_buffers`).
    """
    buffers = [b for b in module.buffers() if b is not None]
    if not buffers:
        return
    # A buffer an autograd graph saved (x * buffer) must not look modified to the backward:
    # the copy keeps its version counter, as DDP's own buffer sync does.
    keep_version = getattr(torch.autograd, "_unsafe_preserve_version_counter", None)
    unchanged = keep_version(tuple(buffers)) if keep_version else contextlib.nullcontext()
    with torch.no_grad(), unchanged:
        for alike in _by_dtype(buffers):
            flat = torch.cat([b.reshape(-1) for b in alike])
            dist.broadcast(flat, src=0, group=group)
            offset = 0
            for b in alike:
                b.copy_(flat[offset : offset + b.numel()].view_as(b))
                offset += b.numel()


def _by_dtype(tensors: list[torch.Tensor]) -> list[list[torch.Tensor]]:
    """``tensors`` grouped by dtype and device, in first-seen order (one broadcast each)."""
    groups: dict[tuple[torch.dtype, torch.device], list[torch.Tensor]] = {}
    for t in tensors:
        groups.setdefault((t.dtype, t.device), []).append(t)
    return list(groups.values())


def _check_sync_batchnorm(model: torch.nn.Module, device: torch.device, world: int) -> None:
    """Refuse SyncBatchNorm layers off the GPU with a message that says what to do (DDP's
    own error, "SyncBatchNorm layers only work with GPU modules", names neither)."""
    if device.type == "cuda":
        return
    names = [
        repr(n) if n else "the model itself"
        for n, m in model.named_modules()
        if isinstance(m, torch.nn.SyncBatchNorm)
    ]
    if names:
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise ValueError(
            f"the model holds SyncBatchNorm layers ({shown}) and trains on {device.type} "
            f"with {world} processes; torch synchronises batch statistics across "
            f"processes on CUDA devices only. On {device.type}, keep plain BatchNorm (each "
            f"process normalises with its own batch): leave out ConvertSyncBatchNormCallback "
            f"or nn.SyncBatchNorm.convert_sync_batchnorm, or train on GPUs."
        )
