"""The body of :meth:`Trainer.predict`: outputs for every sample, in dataset order.

Kept apart from the loop in ``trainer.py``: prediction shares the Trainer's hooks
(``create_eval_dataloader``, ``predict_step``), its device and precision, and nothing of
its training state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import DataLoader

from scramjet.runtime import distributed as dist
from scramjet.runtime.devices import move_to_device
from scramjet.trainer._explain import explain_batch_error
from scramjet.trainer.batch import (
    HeadColumns,
    batch_size_of,
    column_flags,
    concat_outputs,
    in_dataset_order,
    list_groups,
    map_leaves,
)
from scramjet.trainer.checks import (
    check_batch_size,
    check_batched_targets,
    check_dataset,
    check_not_empty,
    recording_order,
)
from scramjet.trainer.data_order import (
    Lockstep,
    ShardSampler,
    check_predict_source,
    check_ready_loader,
    gather_shards,
    safe_len,
)
from scramjet.trainer.state import module_modes, restore_modes

if TYPE_CHECKING:
    from scramjet.trainer.trainer import DataSource, Trainer


def predict(
    trainer: Trainer,
    dataset: DataSource,
    per_device_batch_size: int,
    dataloader_kwargs: Mapping[str, Any] | None,
    collate_fn: Callable[..., Any] | None,
) -> Any:
    """What :meth:`Trainer.predict` returns (its docstring says what that is)."""
    check_dataset(dataset, "dataset")
    check_not_empty(dataset, "predict()'s dataset")
    check_batch_size(per_device_batch_size, "per_device_batch_size")
    world = dist.get_world_size()
    if world > 1:  # outputs are put in dataset order from ShardSampler shares only
        check_predict_source(dataset, world)
        check_ready_loader(dataset, "predict()'s dataset", shard=ShardSampler)
    n_samples = safe_len(dataset.dataset if isinstance(dataset, DataLoader) else dataset)
    if world > 1 and n_samples < world and trainer._collective_forwards():
        # Sharded forwards run in step on every rank: a rank without a sample has none.
        raise ValueError(
            f"predict() of a sharded (FSDP) model on {world} processes needs at least "
            f"{world} samples; received {n_samples}. Predict such a small dataset with the "
            f"full model in one process, or add samples."
        )
    trainer.eval_dataset = dataset
    trainer.collate_fn = collate_fn or trainer._train_collate_fn
    trainer._collate_carried = collate_fn is None
    trainer._place_model()
    kwargs, recorder = recording_order(dataset, dataloader_kwargs, world)
    dl = trainer.create_eval_dataloader(per_device_batch_size, kwargs)
    outputs, sizes = _outputs(trainer, dl)
    if world > 1 and n_samples < world:  # some ranks hold no sample: zero rows of the kind
        outputs, sizes = _with_empty_share(outputs, trainer.device), []
    joined = collect_predictions(outputs, n_samples, sizes)
    if recorder is not None:
        joined = in_dataset_order(joined, recorder.indices)
    return map_leaves(joined, lambda leaf: list(leaf) if isinstance(leaf, HeadColumns) else leaf)


def _outputs(trainer: Trainer, dl: Any) -> tuple[list[Any], list[int]]:
    """``predict_step`` of every real batch of ``dl``, through the unwrapped model, and
    the number of samples of each of those batches."""
    model, modes = trainer._unwrapped_model, module_modes(trainer._unwrapped_model)
    wrapped, trainer.model = trainer.model, model
    outputs: list[Any] = []
    sizes: list[int] = []
    try:
        model.eval()
        with torch.no_grad():
            for batch, real in Lockstep(dl, trainer._collective_forwards()):
                if type(batch) in (tuple, list) and len(batch) >= 2:
                    check_batched_targets(batch[1], "predict")  # zip(X, Y): samples
                batch = move_to_device(batch, trainer.device, non_blocking=True)
                with trainer._autocast():
                    try:
                        output = trainer.predict_step(batch)
                    except (RuntimeError, TypeError, ValueError) as error:  # float64 inputs ...
                        explain_batch_error(error, model, batch, "predict")
                        raise
                if real:  # a repeated batch only kept the forwards in step
                    outputs.append(output if trainer.precision == "no" else _full(output))
                    sizes.append(_samples(batch))
    finally:
        trainer.model = wrapped
        restore_modes(modes)
    return outputs, sizes


def _samples(batch: Any) -> int:
    """The samples in a batch: ``(inputs, targets)``, a dict or the inputs alone."""
    if type(batch) in (tuple, list) and len(batch) >= 2:
        return batch_size_of(batch[0], batch[1])
    return batch_size_of(batch, None)


def _full(output: Any) -> Any:
    """An output computed under autocast with its fp16/bf16 tensors in float32 (as the
    autocast wrapper hands them back): ``.numpy()`` and metric code take them."""
    half = (torch.float16, torch.bfloat16)
    return map_leaves(
        output, lambda leaf: leaf.float() if getattr(leaf, "dtype", None) in half else leaf
    )


def _with_empty_share(outputs: list[Any], device: torch.device) -> list[Any]:
    """``outputs``, or on a rank whose share of the data is empty, one output with no rows
    shaped as the other ranks' (collective): gathering needs every rank's part."""
    joined = concat_outputs(outputs) if outputs else None
    layout = None if joined is None else map_leaves(joined, _leaf_layout)
    layouts = dist.gather_object(layout)
    if outputs:
        return outputs
    model = next(x for x in layouts if x is not None)
    return [map_leaves(model, lambda leaf: _empty_leaf(leaf, device))]


def _leaf_layout(leaf: Any) -> Any:
    """A leaf's kind without its rows: a tensor's dtype and later dimensions, or a list."""
    if isinstance(leaf, torch.Tensor):
        return torch.empty((0, *leaf.shape[1:]), dtype=leaf.dtype)
    return []


def _empty_leaf(leaf: Any, device: torch.device) -> Any:
    return leaf.to(device) if isinstance(leaf, torch.Tensor) else []


def collect_predictions(
    outputs: list[Any], num_samples: int, sizes: list[int] | None = None
) -> Any:
    """Join per-batch outputs (same kind as the model returns); across processes, gather
    every rank's share and restore dataset order. ``sizes``, the samples of each batch,
    lets a list of one tensor per head be joined head by head: it is, when its lists can
    be heads on every rank and cannot all be one entry per sample (ranks decide alike)."""
    if not outputs:
        return outputs
    world = dist.get_world_size()
    flags = [column_flags(g, sizes or []) for g in list_groups(outputs)]
    # Every rank decides alike; list nodes follow the model's output structure, the same
    # on every rank, so outputs without lists skip the collective everywhere.
    everyone = dist.gather_object(flags) if world > 1 and flags else [flags]
    alike = all(len(flags_of_rank) == len(flags) for flags_of_rank in everyone)
    decisions = [
        alike and all(r[i][0] for r in everyone) and not all(r[i][1] for r in everyone)
        for i in range(len(flags))
    ]
    joined = concat_outputs(outputs, iter(decisions))
    if world == 1:
        return joined
    return map_leaves(joined, lambda leaf: _gather_leaf(leaf, num_samples))


def _gather_leaf(leaf: Any, num_samples: int) -> Any:
    """One leaf of a rank's predictions gathered in dataset order; a list of one tensor per
    head, head by head."""
    if isinstance(leaf, HeadColumns):
        return HeadColumns(gather_shards(column, num_samples) for column in leaf)
    return gather_shards(leaf, num_samples)
