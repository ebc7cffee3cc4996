"""Input checks for the Trainer: clear errors that say what was received and how to fix it."""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import SequentialSampler

from scramjet.runtime.stacklevel import user_stacklevel
from scramjet.trainer.batch import OrderRecorder
from scramjet.trainer.data_order import yields_batches
from scramjet.trainer.samplers import ShardSampler, safe_len


def check_dataset(dataset: Any, name: str) -> None:
    """A map-style dataset (``__getitem__`` + ``__len__``) or an iterable of samples."""
    kind = type(dataset)
    map_style = hasattr(kind, "__getitem__") and hasattr(kind, "__len__")  # as DataLoader reads
    is_data = isinstance(dataset, torch.utils.data.Dataset | Iterable) or map_style
    if isinstance(dataset, Mapping):
        raise TypeError(
            f"{name} must be a torch.utils.data.Dataset or an iterable of samples; received "
            f"{type(dataset).__name__} (iterating a mapping gives its keys, not samples). Put "
            f"the arrays in a TensorDataset, e.g. TensorDataset(data['x'], data['y']), or "
            f"write a Dataset whose __getitem__ returns one sample."
        )
    if not is_data or isinstance(dataset, str | bytes):
        raise TypeError(
            f"{name} must be a torch.utils.data.Dataset (with __getitem__ and __len__) or an "
            f"iterable of samples; received {type(dataset).__name__}. Wrap tensors with "
            f"torch.utils.data.TensorDataset(inputs, targets)."
        )
    if not isinstance(dataset, Iterable) and not hasattr(dataset, "__len__"):
        raise TypeError(
            f"{name} has no __len__; received {type(dataset).__name__}. Give it a __len__, or "
            f"make it a torch.utils.data.IterableDataset."
        )
    _check_not_arrays(dataset, name)


def _check_not_arrays(dataset: Any, name: str) -> None:
    """``(inputs, targets)`` arrays passed as the dataset: a tuple or list is a sequence of
    samples, so ``(X, y)`` would be a dataset of two samples, X and y."""
    if not isinstance(dataset, tuple | list) or not 2 <= len(dataset) <= 4:
        return
    shapes = [tuple(getattr(item, "shape", ())) for item in dataset]
    if not all(shapes) or not all(hasattr(item, "__array__") for item in dataset):
        return  # not all arrays (numpy or torch) with at least one dimension
    firsts = {shape[0] for shape in shapes}
    if len(firsts) != 1 or len({len(shape) for shape in shapes}) == 1 or len(dataset) in firsts:
        return  # samples alike in rank, of different lengths, or as many rows as items
    kinds = ", ".join(
        f"{type(item).__name__} {list(shape)}" for item, shape in zip(dataset, shapes)
    )
    raise TypeError(
        f"{name} is a {type(dataset).__name__} of {len(dataset)} arrays ({kinds}); a "
        f"{type(dataset).__name__} is read as a list of samples, so this would be "
        f"{len(dataset)} samples, not {shapes[0][0]}. Pass "
        f"torch.utils.data.TensorDataset(inputs, targets) to have one (input, target) "
        f"sample per row (torch.as_tensor(...) first for numpy arrays)."
    )


def check_batch_size(value: Any, name: str) -> None:
    """A positive int (a numpy integer too: :func:`loader_batch_size` makes it an int)."""
    size = _as_int(value)
    if size is None or size <= 0:
        raise ValueError(
            f"{name} must be a positive int (samples per batch on each device); received "
            f"{value!r}. Pass e.g. {name}=32."
        )


def _as_int(value: Any) -> int | None:
    """``value`` as an int when it is an integer (numpy's included, bools not), else None."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        return None
    return int(value)


def check_optional_positive(value: Any, name: str) -> None:
    """None, or a number > 0 (gradient clipping thresholds)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(
            f"{name} must be a number > 0, or None to disable clipping; received {value!r}. "
            f"Pass e.g. {name}=1.0."
        )


def check_optimizer(optimizer: Any, model: nn.Module) -> None:
    """A torch optimizer holding at least one of the model's parameters."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"optimizer must be a torch.optim.Optimizer; received {type(optimizer).__name__}. "
            f"Create it with e.g. torch.optim.AdamW(model.parameters(), lr=1e-3)."
        )
    model_params = {id(p) for p in model.parameters()}
    held = [p for g in optimizer.param_groups for p in g["params"]]
    if model_params and not any(id(p) in model_params for p in held):
        raise ValueError(
            f"The optimizer holds {len(held)} parameter(s), none of which belong to the model. "
            f"Create the optimizer from this model's parameters (model.parameters()) after "
            f"building the model, not from a copy or another model."
        )
    warn_untrained_parameters(optimizer, model)


def warn_untrained_parameters(optimizer: torch.optim.Optimizer, model: nn.Module) -> None:
    """Warn when parameters of the model that require grad are not in the optimizer.

    They get gradients but are never updated: the usual cause is a layer replaced (a new
    head) or added after the optimizer was created, which then silently keeps its initial
    weights. Parameters frozen with ``requires_grad=False`` are left out on purpose.
    """
    held = {id(p) for g in optimizer.param_groups for p in g["params"]}
    missing = [
        name for name, p in model.named_parameters() if p.requires_grad and id(p) not in held
    ]
    if not missing:
        return
    shown = ", ".join(map(repr, missing[:5])) + (
        f" and {len(missing) - 5} more" if len(missing) > 5 else ""
    )
    warnings.warn(
        f"{len(missing)} trainable parameter(s) of the model are not in the optimizer, so "
        f"they will never be updated: {shown}. This happens when a layer is replaced or "
        f"added after the optimizer was created. Create the optimizer after the last change "
        f"to the model (from model.parameters()), or set requires_grad=False on the "
        f"parameters you mean to keep fixed.",
        UserWarning,
        stacklevel=4,
    )


def check_loss(
    batch_output: Any, hook: str = "calculate_train_batch_loss", model: nn.Module | None = None
) -> None:
    """``calculate_*_batch_loss`` must return a dict whose ``loss`` is a scalar tensor and
    whose ``batch_size`` is an int (what the epoch's mean loss weighs the batch by)."""
    if not isinstance(batch_output, Mapping) or "loss" not in batch_output:
        received = (
            f"a dict with keys {', '.join(map(repr, batch_output))}"
            if isinstance(batch_output, Mapping)
            else type(batch_output).__name__
        )
        raise TypeError(
            f"{hook} must return a dict with keys 'loss', 'model_outputs' and 'batch_size'; "
            f"received {received}. Return e.g. {{'loss': loss, 'model_outputs': outputs, "
            f"'batch_size': len(targets)}}."
        )
    loss = batch_output["loss"]
    if not isinstance(loss, torch.Tensor) or loss.ndim != 0:
        shape = (
            f"a tensor of shape {tuple(loss.shape)}"
            if isinstance(loss, torch.Tensor)
            else type(loss).__name__
        )
        raise ValueError(
            f"The loss from {hook} must be a scalar tensor; received {shape}. Reduce it (e.g. "
            f"use reduction='mean' in the loss function, or call .mean()), and return the "
            f"tensor itself, not loss.item()."
        )
    if loss.is_complex():
        raise ValueError(
            f"The loss from {hook} must be a real number; received a {loss.dtype} scalar, "
            f"which backward() cannot start from and the logs cannot show. Reduce complex "
            f"outputs to a real loss, e.g. (outputs - targets).abs().pow(2).mean(), or take "
            f"loss.real."
        )
    if not loss.requires_grad and torch.is_grad_enabled():
        raise ValueError(_no_gradient(model))
    _check_batch_size_entry(batch_output, hook)


def check_samples(batch_output: Mapping[str, Any], batch: int, epoch: int | None = None) -> None:
    """A batch of 0 samples whose loss is not finite (the mean over nothing is NaN): say so,
    rather than let the NaN guard blame the learning rate or the epoch's loss turn NaN.
    ``batch`` counts from 1; ``epoch`` is None in an evaluation. Reads the loss only then."""
    if batch_output["batch_size"] != 0:
        return
    where = f"batch {batch} of " + ("the evaluation" if epoch is None else f"epoch {epoch}")
    loss = batch_output["loss"]
    if not isinstance(loss, torch.Tensor) or bool(torch.isfinite(loss.detach()).all()):
        return
    raise ValueError(
        f"{where} holds 0 samples, so its loss is {float(loss.detach())} (a mean over "
        f"nothing). Check what yields the batches: a collate_fn that filters samples out "
        f"returned none, or a loader of your own slices past the end of the data. Leave "
        f"empty batches out of the loader, or override calculate_train_batch_loss / "
        f"calculate_eval_batch_loss to return a finite loss for them."
    )


def _no_gradient(model: nn.Module | None) -> str:
    """Why a training loss does not require grad: a frozen model, or a loss cut from the
    graph."""
    params = list(model.parameters()) if model is not None else []
    trainable = sum(p.requires_grad for p in params)
    if params and not trainable:
        return (
            f"The loss does not require grad: none of the model's {len(params)} parameters "
            f"has requires_grad=True (the model is frozen), so nothing would be trained. "
            f"Unfreeze the parameters to train before creating the optimizer, e.g. "
            f"model.requires_grad_(True) or model.head.requires_grad_(True)."
        )
    held = ""
    if params:
        held = f" although {trainable} of the model's {len(params)} parameters are trainable"
    return (
        f"The loss does not require grad{held}, so nothing would be trained: it was cut from "
        f"the model's outputs. Compute it from the outputs with torch operations, not from "
        f"outputs.detach(), loss.item(), numpy or torch.tensor(...) of a value, and outside "
        f"torch.no_grad()."
    )


def check_grad_mode() -> None:
    """``train()`` called inside ``torch.no_grad()`` or ``torch.inference_mode()``: no
    forward would record a graph, and the first backward fails with torch's bare error."""
    if torch.is_inference_mode_enabled():
        context = "torch.inference_mode()"
    elif not torch.is_grad_enabled():
        context = "torch.no_grad() (or torch.set_grad_enabled(False))"
    else:
        return
    raise RuntimeError(
        f"train() was called inside {context}, so no gradient could be computed. Call "
        f"train() outside that block (keep it for evaluation and prediction, which the "
        f"Trainer runs without gradients itself), or re-enable gradients with "
        f"torch.set_grad_enabled(True)."
    )


def _check_batch_size_entry(batch_output: Mapping[str, Any], hook: str) -> None:
    """``batch_size``: an int >= 0 (a tensor, even a 0-dim one, would make the step counters
    tensors, which syncs the device every step and cannot be written as JSON)."""
    if "batch_size" not in batch_output:
        raise TypeError(
            f"{hook}'s dict must include 'batch_size' (an int: the samples the loss is a mean "
            f"over); received keys {', '.join(map(repr, batch_output))}. Add e.g. "
            f"'batch_size': len(targets)."
        )
    size = batch_output["batch_size"]
    if isinstance(size, bool) or not isinstance(size, int):
        raise TypeError(
            f"{hook} returned 'batch_size' {size!r} ({type(size).__name__}); it must be an int, "
            f"the number of samples the loss is a mean over. Return e.g. len(targets) or "
            f"int(targets.shape[0]) (int(tensor) for a count held in a tensor)."
        )
    if size < 0:
        raise ValueError(
            f"{hook} returned 'batch_size' {size!r}; it must be >= 0 (the number of samples "
            f"the loss is a mean over). Return e.g. len(targets)."
        )


def _check_int(value: Any, name: str, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        extra = " or None" if allow_none else ""
        data = isinstance(value, torch.utils.data.Dataset | Iterable)
        if name == "num_epochs" and data and not isinstance(value, str | bytes):  # misplaced data
            raise TypeError(
                f"{name} must be an int ≥ 1{extra}; received the data "
                f"{type(value).__name__}. train()'s second positional argument is "
                f"num_epochs: pass the evaluation data by keyword, e.g. "
                f"trainer.train(train_ds, num_epochs=3, eval_dataset=val_ds)."
            )
        if _as_int(value) is not None and value >= 1:  # a numpy integer
            raise ValueError(
                f"{name} must be a Python int ≥ 1{extra}; received {value!r}, a numpy "
                f"integer. Pass int({name}) (e.g. {name}={int(value)})."
            )
        raise ValueError(
            f"{name} must be an int ≥ 1{extra}; received {value!r}. Pass e.g. {name}=1"
            f"{' (or None for no limit)' if allow_none else ''}."
        )


def check_train_args(
    train_dataset: Any,
    eval_dataset: Any,
    num_epochs: Any,
    per_device_batch_size: Any,
    eval_per_device_batch_size: Any,
    max_num_train_steps: Any,
    gradient_accumulation_steps: Any,
    gradient_clip_value: Any,
    gradient_clip_norm: Any,
) -> None:
    """Every argument check of ``Trainer.train``, with errors naming the argument."""
    check_grad_mode()
    check_dataset(train_dataset, "train_dataset")
    if eval_dataset is not None:
        _check_not_a_batch_size(eval_dataset)
        check_dataset(eval_dataset, "eval_dataset")
    check_batch_size(per_device_batch_size, "per_device_batch_size")
    if eval_per_device_batch_size is not None:
        check_batch_size(eval_per_device_batch_size, "eval_per_device_batch_size")
    check_optional_positive(gradient_clip_value, "gradient_clip_value")
    check_optional_positive(gradient_clip_norm, "gradient_clip_norm")
    _check_int(num_epochs, "num_epochs")
    _check_int(gradient_accumulation_steps, "gradient_accumulation_steps")
    _check_int(max_num_train_steps, "max_num_train_steps", allow_none=True)
    for data, name in ((train_dataset, "train_dataset"), (eval_dataset, "eval_dataset")):
        check_read_once(data, name, num_epochs)
        check_not_empty(data, name)


def _check_not_a_batch_size(eval_dataset: Any) -> None:
    """``train(ds, 3, 32)``, as Keras' ``fit(x, epochs, batch_size)`` reads: the third
    positional argument of ``train()`` is ``eval_dataset``, not the batch size."""
    if isinstance(eval_dataset, int) and not isinstance(eval_dataset, bool):
        raise TypeError(
            f"eval_dataset must be a dataset or an iterable of samples; received the int "
            f"{eval_dataset}. train()'s third positional argument is eval_dataset, not the "
            f"batch size: pass the batch size by keyword, e.g. trainer.train(train_ds, "
            f"num_epochs=3, per_device_batch_size={eval_dataset})."
        )


def check_not_empty(data: Any, name: str) -> None:
    """A dataset with a length must hold at least one sample (else nothing would train)."""
    if data is None or isinstance(data, torch.utils.data.IterableDataset):
        return
    try:
        size = len(data)
    except TypeError:  # no length: an iterable; its end is seen when it is read
        return
    if size == 0 and isinstance(data, torch.utils.data.DataLoader):
        held = safe_len(data.dataset)
        if held:  # the samples are there; drop_last (or a batch sampler) gave no batch
            raise ValueError(
                f"{name} is a DataLoader that gives no batch: its dataset has {held} "
                f"sample(s), its batch size is {data.batch_size} and drop_last="
                f"{data.drop_last} drops a batch smaller than that. Build it with a batch "
                f"size of at most {held}, or drop_last=False."
            )
    if size == 0:
        raise ValueError(
            f"{name} is empty (len() == 0): there is nothing to train on, evaluate or "
            f"predict (a run would make no step and record a NaN loss). Check the dataset's "
            f"source (path, filter, split)."
        )


def check_yields_batches(loader: Any, dataset: Any, batch_size: int) -> None:
    """A training loader with a length must give at least one batch (``drop_last=True``
    with fewer samples than a batch gives none, and the run would train nothing)."""
    try:
        batches, samples = len(loader), len(dataset)
    except TypeError:  # no length: its end is seen when it is read
        return
    if batches == 0:
        raise ValueError(
            f"the training loader gives no batch (train_dataset has {samples} sample(s), the "
            f"batch size is {batch_size} per process, and drop_last=True drops a batch "
            f"smaller than that), so the run would make no step. Lower "
            f"per_device_batch_size, or set drop_last=False."
        )


def check_batched_targets(targets: Any, hook: str) -> None:
    """A batch's targets are one value per sample: a 0-dim tensor is a single sample's.

    That is what a stream of samples read as a stream of batches gives (``zip(X, Y)``, a
    generator of samples, ``DataLoader(batch_size=None)``): each step would train on one
    sample, and ``per_device_batch_size`` would be ignored without a word.
    """
    if isinstance(targets, torch.Tensor):
        if targets.ndim:
            return
        kind = "a 0-dim tensor"
    elif isinstance(targets, int | float):
        kind = f"a Python {type(targets).__name__}"
    else:
        return
    raise ValueError(
        f"in {hook}, the batch's targets are a single value ({targets!r}, {kind}), "
        f"so the batch is one sample: the data yields samples where batches are expected. "
        f"An iterator or generator (zip(X, Y), a generator of samples) or a DataLoader with "
        f"batch_size=None is read as ready batches, one per step, and per_device_batch_size "
        f"does not apply to it. Pass a list (list(zip(X, Y))) or a Dataset, which the Trainer "
        f"batches with per_device_batch_size, or yield batches whose targets hold one value "
        f"per sample (shape [N])."
    )


def loader_batch_size(kwargs: Any, batch_size: int, name: str) -> int:
    """The batch size a loader is built with: a ``batch_size`` in its dataloader kwargs takes
    precedence over the batch-size argument (as in pytorch-accelerated), and is checked."""
    _check_shuffle_with_sampler(kwargs, name)
    _check_batch_sampler_options(kwargs, name)
    if not kwargs or "batch_size" not in kwargs:
        return int(batch_size)  # a numpy integer becomes the int the run records
    check_batch_size(kwargs["batch_size"], f"{name}['batch_size']")
    return int(kwargs["batch_size"])


def _check_shuffle_with_sampler(kwargs: Any, name: str) -> None:
    """``shuffle=True`` next to a ``sampler`` or ``batch_sampler`` is an error, as in a
    DataLoader: the sampler sets the order, and the shuffle would be silently dropped."""
    if not kwargs or not kwargs.get("shuffle"):
        return
    for key in ("sampler", "batch_sampler"):
        if kwargs.get(key) is not None:
            raise ValueError(
                f"{name} hold shuffle=True and a {key} ({type(kwargs[key]).__name__}); the "
                f"{key} sets the order, so shuffle=True would do nothing (a DataLoader "
                f"refuses the two together). Leave shuffle out of {name} and let your "
                f"{key} shuffle (a RandomSampler, or a batch sampler that shuffles its "
                f"batches), or drop the {key}."
            )


def _check_batch_sampler_options(kwargs: Any, name: str) -> None:
    """A ``batch_sampler`` makes the batches: a ``batch_size`` or ``drop_last=True`` next to
    it would be dropped silently (and the batch size recorded for the run would be wrong),
    so, as in a DataLoader, they are an error."""
    if not kwargs or kwargs.get("batch_sampler") is None:
        return
    given = [
        f"{key}={kwargs[key]!r}"
        for key, unset in (("batch_size", (None, 1)), ("drop_last", (None, False)))
        if key in kwargs and kwargs[key] not in unset
    ]
    if given:
        raise ValueError(
            f"{name} hold a batch_sampler ({type(kwargs['batch_sampler']).__name__}) and "
            f"{' and '.join(given)}; the batch sampler decides how many samples each batch "
            f"holds and whether a short last batch is kept, so these would do nothing (a "
            f"DataLoader refuses them together). Leave them out of {name} and set them on "
            f"your batch sampler (e.g. BatchSampler(sampler, batch_size, drop_last))."
        )


def check_scheduler_fn(value: Any) -> None:
    """``create_scheduler_fn``: None, or a callable taking the optimizer."""
    if value is not None and not callable(value):
        raise TypeError(
            f"create_scheduler_fn must be a callable that takes the optimizer and returns a "
            f"scheduler; received {type(value).__name__} {value!r}. Pass e.g. "
            f"CosineWarmupScheduler.create_scheduler_fn(num_warmup_epochs=1) or "
            f"functools.partial(torch.optim.lr_scheduler.StepLR, step_size=10)."
        )


def build_scheduler(given: Any, resolved: Any, optimizer: torch.optim.Optimizer) -> Any:
    """``resolved(optimizer)``; a scheduler class given bare (``create_scheduler_fn=StepLR``)
    whose constructor needs more than the optimizer gets an error that says how to bind it."""
    try:
        return resolved(optimizer)
    except TypeError as error:
        cls = given.func if isinstance(given, functools.partial) else given
        missing = re.findall(r"'(\w+)'", str(error)) if "missing" in str(error) else []
        if not isinstance(cls, type) or not missing:
            raise
        name, bound = cls.__name__, ", ".join(f"{arg}=..." for arg in missing)
        fix = (
            f"add {bound} to the functools.partial"
            if isinstance(given, functools.partial)
            else f"pass create_scheduler_fn=functools.partial({name}, {bound})"
        )
        raise TypeError(
            f"{error}\ncreate_scheduler_fn is called with the optimizer alone "
            f"({name}(optimizer)), so the class {name} needs its other arguments bound: "
            f"{fix}."
        ) from error


def check_trainer_args(loss_func: Any, callbacks: Any) -> None:
    """The loss function is an instance (not a class); callbacks come as a list."""
    if isinstance(loss_func, type):
        raise TypeError(
            f"loss_func received the class {loss_func.__name__}, not a loss function; create "
            f"an instance: loss_func={loss_func.__name__}()."
        )
    if loss_func is not None and not callable(loss_func):
        raise TypeError(
            f"loss_func must be callable as loss_func(outputs, targets); received "
            f"{type(loss_func).__name__}. Pass e.g. torch.nn.CrossEntropyLoss(), or None when "
            f"the model returns its own loss."
        )
    if callbacks is not None and not isinstance(callbacks, Iterable):
        # A class passed alone is named as itself (its type would be ``type``).
        name = callbacks.__name__ if isinstance(callbacks, type) else type(callbacks).__name__
        what = f"the class {name}" if isinstance(callbacks, type) else f"a single {name}"
        raise TypeError(
            f"callbacks must be a list of callbacks; received {what}. Pass "
            f"callbacks=[{name}(...)] (add DEFAULT_CALLBACKS to keep the defaults)."
        )


def check_read_once(data: Any, name: str, num_epochs: int) -> None:
    """A generator or iterator is read once: it can feed one epoch, not ``num_epochs``."""
    if isinstance(data, Iterator) and num_epochs > 1:
        raise ValueError(
            f"{name} is a {type(data).__name__}, which can be read only once, but "
            f"num_epochs={num_epochs} needs it {num_epochs} times. Pass num_epochs=1 (with "
            f"max_num_train_steps to bound a long stream), or something that starts over when "
            f"iterated again: a Dataset, an IterableDataset, a DataLoader, or a list."
        )


def check_device(device: str | torch.device) -> torch.device:
    """``device`` if this machine has it; else an error saying what to pass instead."""
    if not isinstance(device, torch.device):
        try:
            device = torch.device(device)
        except (RuntimeError, TypeError) as error:
            raise ValueError(
                f"device={device!r} is not a device torch knows. Expected 'cpu', 'cuda', "
                f"'cuda:1', 'mps' or a torch.device; or device=None for the best one here."
            ) from error
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (device.index or 0) >= count:
            have = f"{count} CUDA device(s)" if count else "no CUDA device (or no CUDA build)"
            raise ValueError(
                f"device={str(device)!r}, but this machine has {have}. Pass device='cpu', "
                f"or device=None to use the best device available."
            )
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(
            "device='mps', but MPS is not available here (it needs Apple silicon and a torch "
            "built with MPS). Pass device='cpu', or device=None to use the best available."
        )
    return device


def check_scheduler_optimizer(scheduler: Any, optimizer: torch.optim.Optimizer) -> None:
    """The scheduler from ``create_scheduler_fn`` must drive the Trainer's optimizer."""
    if (
        scheduler is None
        or isinstance(scheduler, torch.optim.Optimizer)
        or not callable(getattr(scheduler, "step", None))
    ):
        received = "None" if scheduler is None else type(scheduler).__name__
        raise TypeError(
            f"create_scheduler_fn returned {received}, not a learning-rate scheduler (an "
            f"object with step(), such as torch.optim.lr_scheduler.StepLR), so it cannot "
            f"schedule the learning rate. Return the scheduler built on the optimizer the function receives "
            f"(a def needs its return statement), or pass create_scheduler_fn=None to train "
            f"without one."
        )
    held = getattr(scheduler, "optimizer", optimizer)
    if held is not optimizer:
        raise ValueError(
            f"create_scheduler_fn returned a {type(scheduler).__name__} built on another "
            f"optimizer ({type(held).__name__}), so the run's learning rate would never "
            f"change. Build the scheduler from the optimizer the function receives, e.g. "
            f"create_scheduler_fn=lambda optimizer: StepLR(optimizer, step_size=10)."
        )


def warn_zero_learning_rate(trainer: Any) -> None:
    """After a run's first epoch and its end events: a run without a Trainer scheduler
    whose every learning rate is still 0 has not changed the weights, and will not: an
    ``lr=0`` typed by hand, or a schedule of an earlier ``train()`` that ended at 0 (the
    optimizer keeps the rate its last scheduler set). Checked once per run, after the
    epoch, so a callback that sets the rates (a warmup from 0, AIToolbox's schedulers)
    has had its say."""
    if getattr(trainer, "_lr_checked_for", None) is trainer.run_config:
        return
    trainer._lr_checked_for = trainer.run_config
    groups = getattr(trainer.optimizer, "param_groups", None) or []
    rates = [g.get("lr") if isinstance(g, Mapping) else None for g in groups]
    if trainer.scheduler is not None or not rates or any(lr is None or lr != 0 for lr in rates):
        return  # (an optimizer without numeric rates, a stand-in: nothing to say)
    start = [g.get("initial_lr") for g in groups]
    cause = (
        f"; a scheduler of an earlier train() left it there (it started at "
        f"{', '.join(map(str, start))}). Set it back before the run, e.g. "
        f"for g in optimizer.param_groups: g['lr'] = g['initial_lr'], or pass "
        f"create_scheduler_fn for the run too"
        if all(isinstance(lr, int | float) and lr > 0 for lr in start)
        else ". Create the optimizer with a rate > 0 (e.g. lr=1e-3), or pass "
        "create_scheduler_fn to set the rates during the run"
    )
    warnings.warn(
        f"Every parameter group's learning rate is still 0 after epoch "
        f"{trainer.state.epoch + 1} and no scheduler changes it, so this run has not changed "
        f"the weights and will not{cause}.",
        UserWarning,
        stacklevel=user_stacklevel(),
    )


def warn_if_nothing_left(state: Any, config: Any) -> None:
    """A resumed run whose checkpoint is already past this run's end trains nothing: say so
    (the counts are of the whole run, not of what is left; equal counts stay silent, as
    when a finished run is started again with ``resume_from="auto"``)."""
    limit, done = config.max_num_train_steps, state.global_step
    if limit and done > limit:
        text = (
            f"train(max_num_train_steps={limit}, resume_from=...): the checkpoint has already "
            f"made {done} updates, and max_num_train_steps counts the whole run, so nothing is "
            f"left to train. For N more updates, pass max_num_train_steps={done} + N."
        )
    elif not limit and state.epoch > config.num_epochs:
        text = (
            f"train(num_epochs={config.num_epochs}, resume_from=...): the checkpoint has "
            f"already finished {state.epoch} epochs, and num_epochs counts the whole run, so "
            f"nothing is left to train. For N more epochs, pass num_epochs={state.epoch} + N."
        )
    elif not limit and state.epoch == config.num_epochs and state.batches_seen_in_epoch > 0:
        text = (
            f"train(num_epochs={config.num_epochs}, resume_from=...): the checkpoint is already "
            f"{state.batches_seen_in_epoch} batches into epoch {state.epoch + 1}, and num_epochs "
            f"counts the whole run, so nothing is left to train. To finish that epoch, pass "
            f"num_epochs={state.epoch + 1}; for N more epochs, num_epochs={state.epoch + 1} + N."
        )
    else:
        return
    warnings.warn(text, stacklevel=user_stacklevel())


def ready_loader_batch_size(loader: Any, batch_size: int) -> int:
    """A loader given ready-made batches by its own batch size; ``batch_size`` otherwise."""
    own = getattr(loader, "batch_size", None)
    if own is None:
        own = getattr(getattr(loader, "batch_sampler", None), "batch_size", None)
    return own if isinstance(own, int) and not isinstance(own, bool) and own > 0 else batch_size


def empty_evaluation(data: Any) -> ValueError:
    """The error for evaluation data of unknown length that gave no batch."""
    dropped = (
        " It is read with drop_last=True: a stream shorter than one batch yields none; pass "
        "drop_last=False or a smaller batch size."
        if getattr(data, "drop_last", False)
        else ""
    )
    inner = getattr(data, "dataset", None)
    name = type(data).__name__ + (f" over {type(inner).__name__}" if inner is not None else "")
    return ValueError(
        f"the evaluation data ({name}, of unknown length) yielded no batch, so "
        f"eval_loss_epoch would be NaN. Check the stream's source (path, filter, shard), and "
        f"that its __iter__ returns a new iterator every time it is called.{dropped}"
    )


def warn_unordered_loader(loader: Any) -> None:
    """``predict()`` given a ready DataLoader that reads in another order than the
    dataset's (``shuffle=True``, a random sampler, a batch sampler of its own): the outputs
    come in that order, which cannot be undone from outside the loader, so say so."""
    if not isinstance(loader, torch.utils.data.DataLoader) or isinstance(
        loader.dataset, torch.utils.data.IterableDataset
    ):
        return
    batches = loader.batch_sampler
    ordered = (SequentialSampler, ShardSampler)
    if batches is None or type(batches) is torch.utils.data.BatchSampler:
        sampler = loader.sampler if batches is None else batches.sampler
        if isinstance(sampler, ordered):
            return
        what = f"its sampler ({type(sampler).__name__})"
    else:
        what = f"its batch sampler ({type(batches).__name__})"
    warnings.warn(
        f"predict() got a DataLoader whose order is set by {what}, not the dataset's: the "
        f"outputs come in the loader's order. For outputs in dataset order, pass the "
        f"dataset (with the sampler or batch_sampler in dataloader_kwargs, whose order "
        f"predict() undoes), or a DataLoader with shuffle=False",
        stacklevel=user_stacklevel(),
    )


def _warn_interleaved_stream(data: Any, workers: int) -> None:
    """``predict()`` of a stream read by several worker processes: each reads its own
    part, and the DataLoader takes their batches in turn, so the outputs come in that
    interleaved order, not the stream's."""
    inner = data.dataset if isinstance(data, torch.utils.data.DataLoader) else data
    if workers < 2 or not isinstance(inner, torch.utils.data.IterableDataset):
        return
    warnings.warn(
        f"predict() reads the stream {type(inner).__name__} with {workers} worker processes: "
        f"the DataLoader takes their batches in turn, so the outputs come in that "
        f"interleaved order, not the stream's. For outputs in the stream's order, predict "
        f"with num_workers=0 or 1, or keep an id with each sample and sort by it.",
        stacklevel=user_stacklevel(),
    )


def _check_predicts_every_sample(loader: Any) -> None:
    """A ready DataLoader given to ``predict()`` must not drop its short last batch."""
    if not isinstance(loader, torch.utils.data.DataLoader) or not loader.drop_last:
        return
    size, batch = safe_len(loader.dataset), loader.batch_size
    if not size or not batch or size % batch == 0:
        return
    raise ValueError(
        f"predict() returns one output per sample, but the DataLoader it was given has "
        f"drop_last=True, which leaves out the last {size % batch} sample(s) of {size} "
        f"(batch size {batch}). Leave drop_last out of the DataLoader used for prediction, "
        f"or pass the dataset itself."
    )


def recording_order(
    dataset: Any, kwargs: Mapping[str, Any] | None, world: int
) -> tuple[dict[str, Any], OrderRecorder | None]:
    """``predict()``'s loader kwargs, with a sampler or batch sampler of the user's wrapped
    to record its order (one process: the outputs are put back in dataset order); a ready
    DataLoader that reads out of order is only warned about."""
    given = dict(kwargs or {})
    if yields_batches(dataset):
        _check_predicts_every_sample(dataset)
        warn_unordered_loader(dataset)
        _warn_interleaved_stream(
            dataset, dataset.num_workers if isinstance(dataset, torch.utils.data.DataLoader) else 0
        )
        return given, None
    _warn_interleaved_stream(dataset, given.get("num_workers") or 0)
    if given.get("drop_last"):
        raise ValueError(
            "predict() returns one output per sample of its dataset, but its "
            "dataloader_kwargs hold drop_last=True, which leaves out a last batch smaller "
            "than the batch size. Leave drop_last out of predict()'s dataloader_kwargs "
            "(keep it for training only)."
        )
    for key in ("batch_sampler", "sampler"):
        if world == 1 and given.get(key) is not None:
            recorder = given[key] = OrderRecorder(given[key])
            return given, recorder
    return given, None
