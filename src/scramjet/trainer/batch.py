"""What the default hooks do with a batch and with a model's outputs.

A batch is either a sequence ``(inputs, targets, ...)`` or a mapping such as a Hugging
Face batch ``{"input_ids": ..., "attention_mask": ..., "labels": ...}``:

- a sequence calls ``model(batch[0])`` and computes ``loss_func(logits, batch[1])``;
- a mapping calls ``model(**batch)`` (keys the model's ``forward`` does not take, such as
  the targets of a model that computes no loss, are left out, and keys other than targets
  are named in one warning per model; the ``forward`` of the model inside a DDP,
  DataParallel or ``torch.compile`` wrapper decides, and a Hugging Face ``forward``'s
  ``**kwargs`` takes only the keywords transformers names, such as ``num_items_in_batch``
  or ``cu_seq_lens_q``, so an ``"id"`` or ``"text"`` column is dropped as Hugging Face's
  Trainer drops unused columns). If the output
  carries a ``loss`` (an attribute or a key, as Hugging Face models return when given
  ``labels``; or a tuple's first element when that is a 0-dim floating tensor, as they
  return ``(loss, logits, ...)`` with ``return_dict=False``), that is the loss (a
  ``loss_func`` given as well is not used, with one warning per loss function); otherwise
  the targets are the batch's first key among :data:`TARGET_KEYS` and the loss is
  ``loss_func(logits, targets)``.

The logits of an output are the output itself for a tensor, its ``logits`` field or key
for a dataclass, a ``ModelOutput`` or a dict, and the first element of a tuple (the
second when the first is such a loss).
:func:`concat_outputs` joins per-batch outputs of any of these kinds back into one of the
same kind, along the batch dimension; tensors whose later dimensions differ between
batches (sequences padded per batch by a collate function such as Hugging Face's
``DataCollatorWithPadding``) are padded at their end to the longest with
:data:`PAD_VALUE`.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from scramjet.checkpoint.payload import unwrap
from scramjet.runtime.distributed import pad_end
from scramjet.runtime.stacklevel import user_stacklevel

#: Keys of a mapping batch that hold the targets, in the order they are looked for.
TARGET_KEYS = ("labels", "label", "targets", "target", "y")
#: Field or key of a model output that holds the logits.
LOGITS_KEY = "logits"
#: Class attribute by which a wrapper module whose ``forward`` takes ``*args, **kwargs`` names
#: the attribute holding the module it calls (``AcceleratedModel`` sets it to ``"module"``):
#: the keys of a dict batch are then chosen by that module's ``forward``.
FORWARDS_TO = "__scramjet_forwards_to__"
#: What pads the later dimensions of per-batch output tensors of different sizes when they
#: are joined (Hugging Face's ignore index, so padded label positions are skipped by
#: losses and metrics that take ``ignore_index=-100``); bool and unsigned tensors get 0.
PAD_VALUE = -100


def split_batch(batch: Any, hook: str) -> tuple[Any, Any]:
    """``(inputs, targets)`` of a batch; targets are None for a mapping without target key.

    Raises:
        TypeError: the batch is neither a sequence of at least two items nor a mapping.
    """
    if isinstance(batch, Mapping):
        key = next((k for k in TARGET_KEYS if k in batch), None)
        return batch, (batch[key] if key is not None else None)
    if isinstance(batch, Sequence) and not isinstance(batch, str | bytes) and len(batch) >= 2:
        return batch[0], batch[1]
    evaluation = (
        " Evaluation computes a loss, so it needs targets; for the model's outputs on data "
        "without targets, call trainer.predict(dataset)."
        if "eval" in hook
        else ""
    )
    raise TypeError(
        f"{hook} received a batch of type {_batch_kind(batch)}, with no targets; the default "
        f"hooks take (inputs, targets) sequences or dict batches (model(**batch), targets "
        f"under one of {', '.join(repr(k) for k in TARGET_KEYS)}). Return (input, target) "
        f"samples from your dataset (torch.utils.data.TensorDataset(inputs, targets) for "
        f"tensors) or such batches from your collate_fn, or override {hook}.{evaluation}"
    )


def _batch_kind(batch: Any) -> str:
    """'Tensor ((8, 4) float32)', 'list (1 item: a tensor (8, 4) float32)'."""
    if isinstance(batch, torch.Tensor):
        return f"Tensor ({_described(batch)})"
    if isinstance(batch, Sequence) and not isinstance(batch, str | bytes):
        items = ", ".join(
            f"a tensor {_described(item)}" if isinstance(item, torch.Tensor) else _described(item)
            for item in batch[:2]
        )
        count = f"{len(batch)} item{'s' if len(batch) != 1 else ''}"
        return f"{type(batch).__name__} ({count}{': ' + items if items else ''})"
    return type(batch).__name__


def call_model(model: nn.Module, inputs: Any, *, with_targets: bool = True) -> Any:
    """``model(**inputs)`` for a mapping (keys its forward takes), else ``model(inputs)``.

    With ``with_targets=False`` (prediction) the target keys of a mapping are left out
    (unless the forward requires them: it has no default for them), and for a forward that
    names them (Hugging Face models): ``use_cache=False``, so no
    key/value cache is built and kept with every batch's output, and an encoder-decoder
    model's ``decoder_input_ids`` are made from the batch's ``labels`` as the model itself
    does when given them (``prepare_decoder_input_ids_from_labels``), so its logits are the
    teacher-forced ones. A batch that sets either key keeps its own.

    Raises:
        TypeError: the forward requires an argument that no key of the batch names.
    """
    if not isinstance(inputs, Mapping):
        return model(inputs)
    # A wrapper's forward says nothing of the keys the model takes: DDP's and DataParallel's
    # take ``*inputs, **kwargs``, torch.compile's is set on the instance. Ask the model's own.
    inner = _innermost(model)
    model_type = type(inner)
    if model_type not in _FORWARD_PARAMETERS:
        _FORWARD_PARAMETERS[model_type] = _forward_parameters(model_type)
    named, takes_any, required = _FORWARD_PARAMETERS[model_type]
    kwargs = {
        k: v
        for k, v in inputs.items()
        if (takes_any or k in named) and (with_targets or k not in TARGET_KEYS or k in required)
    }
    if not takes_any:
        _warn_dropped_keys(inner, [k for k in inputs if k not in named and k not in TARGET_KEYS])
    if not required <= kwargs.keys():
        raise TypeError(_missing_keys_message(model_type, inputs, required, with_targets))
    if not with_targets:
        kwargs.update(_prediction_inputs(inner, inputs, named))
    return model(**kwargs)


def _missing_keys_message(
    model_type: type, inputs: Mapping[str, Any], required: frozenset[str], with_targets: bool
) -> str:
    """Why ``model(**batch)`` cannot be called, and the ways out."""
    missing = sorted(required - set(inputs))
    hooks = "predict_step"
    if with_targets:
        hooks = "calculate_train_batch_loss / calculate_eval_batch_loss"
    return (
        f"A dict batch is passed as model(**batch), but {model_type.__name__}.forward requires "
        f"{', '.join(map(repr, missing))}, which no key of the batch names (batch keys: "
        f"{', '.join(map(repr, inputs)) or 'none'}; forward requires "
        f"{', '.join(map(repr, sorted(required)))}). Name the batch's keys after forward's "
        f"parameters, return (inputs, targets) tuples from the dataset or collate_fn, or "
        f"override {hooks} to call the model yourself."
    )


def _prediction_inputs(
    inner: nn.Module, inputs: Mapping[str, Any], named: frozenset[str]
) -> dict[str, Any]:
    """What a prediction passes besides the batch (see :func:`call_model`)."""
    extra: dict[str, Any] = {}
    if "use_cache" in named and "use_cache" not in inputs:
        extra["use_cache"] = False
    labels = inputs.get("labels")
    prepare = getattr(inner, "prepare_decoder_input_ids_from_labels", None)
    own = {"decoder_input_ids", "decoder_inputs_embeds"} & set(inputs)
    if "decoder_input_ids" in named and callable(prepare) and labels is not None and not own:
        extra["decoder_input_ids"] = prepare(labels=labels)
    return extra


def _innermost(model: nn.Module) -> nn.Module:
    """The module whose ``forward`` receives the inputs, through DDP, DataParallel,
    ``torch.compile`` and wrappers that name their inner module (:data:`FORWARDS_TO`)."""
    seen: set[int] = set()
    while id(model) not in seen:
        seen.add(id(model))
        model = unwrap(model)
        attribute = getattr(type(model), FORWARDS_TO, None)
        inner = getattr(model, attribute, None) if isinstance(attribute, str) else None
        if not isinstance(inner, nn.Module):
            break
        model = inner
    return model


#: Keyword names each model class's forward names, whether it takes any keyword
#: (``**kwargs``), and the names it requires (no default), computed once per class.
_FORWARD_PARAMETERS: weakref.WeakKeyDictionary[
    type, tuple[frozenset[str], bool, frozenset[str]]
] = weakref.WeakKeyDictionary()


def _forward_parameters(model_type: type[nn.Module]) -> tuple[frozenset[str], bool, frozenset[str]]:
    """Names ``forward`` takes as keywords, whether it takes ``**kwargs`` (anything), and
    the names it requires."""
    try:
        signature = inspect.signature(model_type.forward)
    except (TypeError, ValueError):  # a builtin or C forward: pass everything
        return frozenset(), True, frozenset()
    parameters = list(signature.parameters.values())[1:]  # without self
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    positional = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    keywords = [p for p in parameters if p.kind not in positional]
    names = frozenset(p.name for p in keywords if p.kind is not inspect.Parameter.POSITIONAL_ONLY)
    required = frozenset(p.name for p in keywords if p.default is inspect.Parameter.empty)
    if takes_any and getattr(model_type.forward, "__module__", "").startswith("transformers."):
        # A Hugging Face forward's **kwargs takes the attention and output settings it
        # names; other columns (an "id", a "text") are dropped, as its Trainer does.
        names, takes_any = names | _hf_keyword_names(), False
    return names, takes_any, required & names


def _hf_keyword_names() -> frozenset[str]:
    """The keywords Hugging Face forwards take through ``**kwargs`` (``TransformersKwargs``,
    ``FlashAttentionKwargs``: ``num_items_in_batch``, ``cu_seq_lens_q``, ...)."""
    names: set[str] = set()
    for module, name in _HF_KWARGS:
        typed = getattr(sys.modules.get(module), name, None)
        names.update(getattr(typed, "__annotations__", {}))
    return frozenset(names)


#: Where transformers defines the typed dicts of its forwards' ``**kwargs`` (read only when
#: a model of it is used, so transformers is already imported).
_HF_KWARGS = (
    ("transformers.utils.generic", "TransformersKwargs"),
    ("transformers.modeling_flash_attention_utils", "FlashAttentionKwargs"),
)
#: Per model, the batch keys its forward does not take that were already warned about.
_DROPPED_KEYS: weakref.WeakKeyDictionary[nn.Module, set[str]] = weakref.WeakKeyDictionary()


def _warn_dropped_keys(model: nn.Module, dropped: list[str]) -> None:
    """One warning per model for the keys of a dict batch its forward does not take."""
    warned = _DROPPED_KEYS.setdefault(model, set())
    new = [k for k in dropped if k not in warned]
    if not new:
        return
    warned.update(new)
    warnings.warn(
        f"the dict batch holds {', '.join(map(repr, new))}, which "
        f"{type(model).__name__}.forward does not take, so it is left out of "
        f"model(**batch) (as Hugging Face's Trainer drops unused columns). If the model "
        f"should read it, check its spelling against forward's parameters; otherwise remove "
        f"the column from the dataset or collate_fn to silence this warning.",
        UserWarning,
        stacklevel=user_stacklevel(),
    )


def output_field(output: Any, name: str) -> Any:
    """``output.name`` or ``output[name]`` (None when absent), for dicts and dataclasses."""
    if isinstance(output, Mapping):
        return output.get(name)
    return getattr(output, name, None) if not isinstance(output, torch.Tensor) else None


def logits_of(output: Any, hook: str) -> Any:
    """The logits of a model output (see the module docstring).

    Raises:
        TypeError: the output has no logits where the default hooks look for them.
    """
    if isinstance(output, torch.Tensor):
        return output
    found = output_field(output, LOGITS_KEY)
    if found is not None:
        return found
    if isinstance(output, tuple) and output:
        first = output[1] if _leading_loss(output) is not None else output[0]
        if isinstance(first, torch.Tensor):
            return first
    fields = _field_names(output)
    raise TypeError(
        f"{hook}: the model returned a {type(output).__name__} with no {LOGITS_KEY!r} "
        f"(fields: {', '.join(fields) or 'none'}) and no 'loss'; the default hooks pass a "
        f"tensor, a tuple's first element or the {LOGITS_KEY!r} field to loss_func. Return "
        f"one of those from the model, or override {hook} to pick the output to use."
    )


def _leading_loss(output: Any) -> torch.Tensor | None:
    """The loss a tuple output starts with: ``(loss, logits, ...)``, as Hugging Face models
    return with ``return_dict=False`` when given ``labels``. A 0-dim floating tensor cannot
    be a batch's logits, so a first element of that kind is taken as the loss."""
    if not isinstance(output, tuple) or len(output) < 2:
        return None
    first = output[0]
    if isinstance(first, torch.Tensor) and first.ndim == 0 and first.is_floating_point():
        return first
    return None


def compute_loss(
    output: Any,
    targets: Any,
    loss_func: Callable[..., torch.Tensor] | None,
    hook: str,
) -> torch.Tensor:
    """The loss of a step: the output's own ``loss`` if it has one (a field, a key, or a
    tuple's leading 0-dim loss), else ``loss_func``.

    Raises:
        TypeError: no loss in the output and no loss function, or no targets for it.
    """
    own = output_field(output, "loss")
    if own is None:
        own = _leading_loss(output)
    if isinstance(own, torch.Tensor):
        if loss_func is not None:
            _warn_unused_loss_func(loss_func, output, hook)
        return own
    if loss_func is None:
        hint = (
            f" (the batch holds no targets under {', '.join(map(repr, TARGET_KEYS))}: a "
            f"Hugging Face model computes its loss only when the batch holds 'labels', so "
            f"add them, e.g. with a DataCollatorForLanguageModeling)"
            if targets is None
            else " (the batch holds targets, but the model computed no loss from them: a "
            "Hugging Face model does so only from a key named 'labels', so rename 'label' "
            "or 'target' to 'labels')"
        )
        raise TypeError(
            f"{hook}: Trainer(loss_func=None) and the model's output "
            f"({type(output).__name__}) has no 'loss'{hint}; pass a loss function (e.g. "
            f"torch.nn.CrossEntropyLoss()), return a 'loss' from the model, or override {hook}."
        )
    if targets is None:
        raise TypeError(
            f"{hook}: the dict batch has no targets (looked for keys "
            f"{', '.join(repr(k) for k in TARGET_KEYS)}) and the model returned no 'loss'. "
            f"Name the targets 'labels' in the batch, or override {hook}."
        )
    return tensor_loss(loss_func, logits_of(output, hook), targets, hook)


#: Loss functions already warned about by :func:`_warn_unused_loss_func` (once each).
_UNUSED_LOSS_FUNCS: weakref.WeakSet[Any] = weakref.WeakSet()


def _warn_unused_loss_func(loss_func: Callable[..., torch.Tensor], output: Any, hook: str) -> None:
    """One warning per loss function that a model's own loss leaves unused."""
    try:
        if loss_func in _UNUSED_LOSS_FUNCS:
            return
        _UNUSED_LOSS_FUNCS.add(loss_func)
    except TypeError:  # not weakly referenceable (a bound method): warned once per place
        pass
    name = getattr(loss_func, "__name__", type(loss_func).__name__)
    warnings.warn(
        f"{hook}: the model returned its own 'loss' (in its {type(output).__name__}; a "
        f"Hugging Face model computes one when the batch holds 'labels'), which is trained "
        f"on, so loss_func {name} is not used. To train on loss_func, put the targets under "
        f"a key the model computes no loss from, such as 'targets' (a "
        f"DataCollatorWithPadding renames 'label' to 'labels'), or override {hook}; to "
        f"train on the model's loss, pass Trainer(loss_func=None).",
        UserWarning,
        stacklevel=user_stacklevel(),
    )


def tensor_loss(
    loss_func: Callable[..., torch.Tensor], logits: Any, targets: Any, hook: str
) -> torch.Tensor:
    """``loss_func(logits, targets)``; an error names the shapes it was given."""
    check_elementwise_shapes(loss_func, logits, targets, hook)
    if isinstance(loss_func, nn.NLLLoss) and loss_func not in _LOG_PROBABILITIES_SEEN:
        check_log_probabilities(loss_func, logits, hook)
    try:
        loss: torch.Tensor = loss_func(logits, targets)
    except (RuntimeError, ValueError, IndexError, TypeError) as error:
        if isinstance(error, TypeError) and not _collated_sequence(targets):
            raise  # e.g. a loss function of another signature: its own error says it
        described = _with_shapes(error, loss_func, logits, targets, hook)
        if described is error:
            raise
        raise described from error
    return loss


# Losses that compare outputs and targets element by element: shapes that differ broadcast
# ([N, 1] against [N] gives [N, N]) and the loss is wrong without an error.
_ELEMENTWISE = (
    nn.MSELoss,
    nn.L1Loss,
    nn.SmoothL1Loss,
    nn.HuberLoss,
    nn.BCELoss,
    nn.BCEWithLogitsLoss,
)


#: NLLLoss instances whose first outputs were log-probabilities (checked once each).
_LOG_PROBABILITIES_SEEN: weakref.WeakSet[Any] = weakref.WeakSet()


def check_log_probabilities(loss_func: nn.NLLLoss, logits: Any, hook: str) -> None:
    """NLLLoss takes log-probabilities, which are never positive: raw logits or
    probabilities would train the loss down without bound (to minus infinity) in silence.
    Checked on the first batch of each loss function only (one read of the outputs)."""
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point() or not logits.numel():
        return
    top = float(logits.detach().max())
    if top > 1e-3:
        raise ValueError(
            f"{hook}: NLLLoss takes log-probabilities (values <= 0), but the outputs "
            f"{_described(logits)} reach {top:.4g}: they are raw logits or probabilities, and "
            f"the loss would fall without bound while nothing is learned. Apply "
            f"torch.log_softmax(outputs, dim=1) at the end of the model (not softmax), or "
            f"use torch.nn.CrossEntropyLoss() on the raw logits."
        )
    _LOG_PROBABILITIES_SEEN.add(loss_func)


def _described(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{tuple(value.shape)} {str(value.dtype).removeprefix('torch.')}"
    return type(value).__name__


def check_elementwise_shapes(loss_func: Any, logits: Any, targets: Any, hook: str) -> None:
    """An element-wise loss refuses outputs and targets of different shapes."""
    if not isinstance(loss_func, _ELEMENTWISE) or not isinstance(logits, torch.Tensor):
        return
    if isinstance(targets, torch.Tensor) and logits.shape != targets.shape:
        raise ValueError(
            f"{hook}: {type(loss_func).__name__} compares outputs and targets element by "
            f"element, but the outputs are {_described(logits)} and the targets "
            f"{_described(targets)}: they would broadcast and the loss would be wrong. Make "
            f"them match, e.g. outputs.squeeze(-1) for one output per sample, or targets "
            f"shaped like the outputs in the dataset."
        )


def _with_shapes(
    error: Exception, loss_func: Any, logits: Any, targets: Any, hook: str
) -> Exception:
    """The loss function's error, of the same type, with what it was given and the usual
    fix; the error itself when the outputs and targets look right for the loss (the loss
    function's own error, such as a check of its own, says it best)."""
    hint = _loss_hint(error, loss_func, logits, targets)
    if hint is None:
        return error
    text = (
        f"{error}\n{hook}: {type(loss_func).__name__} received outputs {_described(logits)} "
        f"and targets {_described(targets)}. {hint}"
    )
    try:
        return type(error)(text)
    except Exception:  # an error type that takes other arguments: keep it as it is
        return error


def _collated_sequence(targets: Any) -> bool:
    """Targets that default_collate left as a sequence (of strings, or of tensors from a
    ``[label]`` per sample), not records such as detection targets' dicts."""
    kinds = str | int | float | torch.Tensor
    return isinstance(targets, list | tuple) and all(isinstance(t, kinds) for t in targets)


def _loss_hint(error: Exception, loss_func: Any, logits: Any, targets: Any) -> str | None:
    """The usual fix for a loss function's refusal of these outputs and targets; None when
    they look right for the loss (the error is then the loss function's own matter)."""
    if _collated_sequence(targets):
        shown = ", ".join("tensor" if isinstance(t, torch.Tensor) else repr(t) for t in targets[:3])
        return (
            f"The targets reached the loss as a {type(targets).__name__} ({shown}"
            f"{', ...' if len(targets) > 3 else ''}), not a tensor: torch's default_collate "
            f"makes one tensor of numbers and tensors only; strings stay a sequence of "
            f"strings, and a target returned as a list ([label]) becomes a list of tensors. "
            f"Return each sample's target as a number or tensor, mapping text labels to "
            f"class indices in the dataset (e.g. classes.index(label))."
        )
    if not isinstance(logits, torch.Tensor) or not isinstance(targets, torch.Tensor):
        return None
    if isinstance(loss_func, _ELEMENTWISE):
        if targets.is_floating_point() and targets.dtype == logits.dtype:
            return None  # float targets shaped like the outputs (checked before the call)
        return (
            "This loss compares each output with a float target of the same shape: make "
            "the targets float and shaped like the outputs (targets.float(), in the dataset "
            "or a collate_fn)."
        )
    if "out of bounds" in str(error) and logits.ndim >= 2 and targets.numel():
        hint = _bounds_hint(loss_func, logits, targets)
        if hint is not None:
            return hint
    return _class_target_hint(logits, targets)


def _bounds_hint(loss_func: Any, logits: torch.Tensor, targets: torch.Tensor) -> str | None:
    """Class targets outside ``0..C-1`` of outputs ``[N, C, ...]``; None when all lie inside."""
    low, high, classes = int(targets.min()), int(targets.max()), logits.shape[1]
    if low < 0:
        skip = (
            f"{type(loss_func).__name__}(ignore_index={low})"
            if isinstance(loss_func, nn.Module)
            else f"pass ignore_index={low} to the loss function"
        )
        return (
            f"Class targets are indices from 0, but the smallest target in this batch is "
            f"{low}. If {low} marks samples without a label, have the loss skip them: "
            f"{skip}; otherwise map the labels to 0..{classes - 1} in the dataset."
        )
    if high < classes:
        return None
    return (
        f"The model outputs {classes} classes (dimension 1 of the outputs), so the "
        f"targets must lie in 0..{classes - 1}, but the largest target in this batch is {high} and "
        f"the smallest {low}: give the model's last layer as many outputs as the data "
        f"has classes ({high + 1} for labels 0..{high}), map the labels to "
        f"0..{classes - 1}, or mark targets to skip with the loss's ignore_index "
        f"(-100 by default)."
    )


def _class_target_hint(logits: torch.Tensor, targets: torch.Tensor) -> str | None:
    """Targets that are neither class indices (int64, the outputs' shape without dimension
    1) nor class probabilities (float, the outputs' shape); None when they are one of them."""
    index_shape = tuple(logits.shape[:1]) + tuple(logits.shape[2:])
    if targets.dtype == torch.int64 and tuple(targets.shape) == index_shape:
        return None
    if targets.is_floating_point() and targets.shape == logits.shape:
        return None
    if logits.ndim >= 3 and tuple(targets.shape) == tuple(logits.shape[:-1]):
        return (
            f"The outputs hold the classes in their last dimension, but this loss reads "
            f"them in dimension 1 ([N, C, ...] against targets [N, ...]): pass "
            f"outputs.transpose(1, 2) (for [N, T, C] outputs), or flatten both: "
            f"outputs.reshape(-1, {logits.shape[-1]}) and targets.reshape(-1)."
        )
    return (
        "For classification losses the targets are class indices [N] of dtype int64 "
        "(targets.long(), targets.squeeze(1); not one-hot integers) or class probabilities "
        "shaped like the outputs (float)."
    )


def batch_size_of(inputs: Any, targets: Any) -> int:
    """Samples in a batch: the first dimension of the targets, else of the inputs.

    A tensor (of the targets, then of the inputs) says it best. Otherwise the containers
    are searched: a list of dicts (one record per sample, such as detection targets
    ``[{"boxes": ..., "labels": ...}, ...]``) counts its records, not the first record's
    boxes; other containers give their first tensor's first dimension.
    """
    for value in (targets, inputs):
        if isinstance(value, torch.Tensor) and value.ndim:
            return int(value.shape[0])
    for value in (targets, inputs):
        size = _first_dim(value)
        if size is not None:
            return size
    return 1


def _first_dim(value: Any) -> int | None:
    if isinstance(value, torch.Tensor):
        return int(value.shape[0]) if value.ndim else 1
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        return len(value)  # one record per sample
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, list | tuple):
        for item in value:
            size = _first_dim(item)
            if size is not None:
                return size
        return len(value) if isinstance(value, list) else None
    return None


def _field_names(output: Any) -> list[str]:
    if isinstance(output, Mapping):
        return [str(k) for k in output]
    if dataclasses.is_dataclass(output):
        return [f.name for f in dataclasses.fields(output)]
    return []


class HeadColumns(list):  # type: ignore[type-arg]
    """A model's list of per-head tensors joined head by head (each with a row per sample)."""


def concat_outputs(outputs: list[Any], columns: Iterator[bool] | None = None) -> Any:
    """Join per-batch outputs into one of the same kind along the batch dimension.

    Tensors are concatenated (0-dim tensors, one per batch, are stacked; when their later
    dimensions differ, each is first padded at the end to the longest with
    :data:`PAD_VALUE`); dicts, dataclasses
    (Hugging Face ``ModelOutput`` included), named tuples and tuples are joined field by
    field; lists are chained (one entry per sample, such as detection results), unless
    ``columns`` (one decision per list, in the order of :func:`list_groups`) says they are
    columns: one tensor per head, joined head by head into a :class:`HeadColumns`. None
    stays None. Anything else comes back as a list with one entry per batch.
    """
    first = outputs[0]
    if isinstance(first, torch.Tensor):
        detached = [o.detach() for o in outputs]
        return torch.stack(detached) if first.ndim == 0 else torch.cat(_pad_to_longest(detached))
    if first is None:
        return None
    if dataclasses.is_dataclass(first) and not isinstance(first, type):
        names = [f.name for f in dataclasses.fields(first)]
        joined = {n: _join_field([getattr(o, n) for o in outputs], columns) for n in names}
        return type(first)(**joined)
    if isinstance(first, Mapping):
        joined_map = {k: _join_field([o[k] for o in outputs], columns) for k in first}
        return joined_map if type(first) is dict else _rebuild(first, joined_map)
    if isinstance(first, tuple):
        parts = [_join_field([o[i] for o in outputs], columns) for i in range(len(first))]
        return type(first)(*parts) if hasattr(first, "_fields") else tuple(parts)
    if isinstance(first, list):
        if columns is not None and next(columns, False):
            return HeadColumns(concat_outputs([o[i] for o in outputs]) for i in range(len(first)))
        return [item for o in outputs for item in o]
    return list(outputs)


def list_groups(outputs: list[Any]) -> Iterator[list[Any]]:
    """The per-batch lists inside ``outputs``, in the order :func:`concat_outputs` meets them."""
    first = outputs[0]
    if dataclasses.is_dataclass(first) and not isinstance(first, type):
        fields: list[list[Any]] = [
            [getattr(o, f.name) for o in outputs] for f in dataclasses.fields(first)
        ]
    elif isinstance(first, Mapping):
        fields = [[o[k] for o in outputs] for k in first]
    elif isinstance(first, tuple):
        fields = [[o[i] for o in outputs] for i in range(len(first))]
    elif isinstance(first, list):
        yield outputs
        return
    else:
        return
    for values in fields:
        if not all(v is None for v in values):
            yield from list_groups(values)


def column_flags(group: list[Any], sizes: list[int]) -> tuple[bool, bool]:
    """Whether per-batch lists can be columns (the same number of tensors in every batch,
    each with one row per sample of its batch), and whether they can be one entry per
    sample (as long as their batch)."""
    width = len(group[0])
    per_sample = len(group) == len(sizes) and all(len(o) == n for o, n in zip(group, sizes))
    columns = bool(width) and len(group) == len(sizes)
    for o, n in zip(group, sizes):
        columns = columns and type(o) is list and len(o) == width
        columns = columns and all(
            isinstance(t, torch.Tensor) and t.ndim and t.shape[0] == n for t in o
        )
    return columns, per_sample


def _pad_to_longest(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """The tensors, each padded at the end of its later dimensions to the longest among
    them (with :data:`PAD_VALUE`); unchanged when those dimensions already agree."""
    shapes = {tuple(t.shape[1:]) for t in tensors}
    if len(shapes) == 1 or len({len(s) for s in shapes}) != 1:
        return tensors  # equal, or of different ranks (torch.cat's error names the sizes)
    longest = [max(sizes) for sizes in zip(*shapes)]
    return [
        t if list(t.shape[1:]) == longest else pad_end(t, (t.shape[0], *longest), PAD_VALUE)
        for t in tensors
    ]


def _rebuild(like: Mapping[Any, Any], items: dict[Any, Any]) -> Any:
    """A mapping of ``like``'s type holding ``items`` (OrderedDict, defaultdict-free types)."""
    constructor: Callable[[dict[Any, Any]], Any] = type(like)
    return constructor(items)


def _join_field(values: list[Any], columns: Iterator[bool] | None = None) -> Any:
    if all(v is None for v in values):
        return None
    return concat_outputs(values, columns)


def map_leaves(value: Any, fn: Callable[[Any], Any]) -> Any:
    """Rebuild ``value`` (tensor, list, dict, dataclass, tuple) with ``fn`` applied to the
    tensors and lists inside it; None stays None."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor | list):
        return fn(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = [f.name for f in dataclasses.fields(value)]
        return type(value)(**{n: map_leaves(getattr(value, n), fn) for n in names})
    if isinstance(value, Mapping):
        mapped = {k: map_leaves(v, fn) for k, v in value.items()}
        return mapped if type(value) is dict else _rebuild(value, mapped)
    if isinstance(value, tuple):
        items = [map_leaves(v, fn) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return fn(value)


__all__ = [
    "FORWARDS_TO",
    "LOGITS_KEY",
    "PAD_VALUE",
    "TARGET_KEYS",
    "HeadColumns",
    "batch_size_of",
    "call_model",
    "column_flags",
    "compute_loss",
    "concat_outputs",
    "list_groups",
    "logits_of",
    "map_leaves",
    "output_field",
    "split_batch",
]


class OrderRecorder:
    """A sampler or batch sampler passed through unchanged, remembering the sample
    indices it gives, in order: ``predict`` puts the outputs of a bucketing batch sampler
    (or a shuffling sampler) back in dataset order with them."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.indices: list[int] = []

    def __iter__(self) -> Any:
        self.indices = []
        for item in self.inner:
            if isinstance(item, Sequence | torch.Tensor):
                self.indices.extend(int(i) for i in item)
            else:
                self.indices.append(int(item))
            yield item

    def __len__(self) -> int:
        return len(self.inner)

    def __getattr__(self, name: str) -> Any:  # set_epoch, generator, ... of the inner one
        return getattr(self.__dict__["inner"], name)


def in_dataset_order(joined: Any, indices: list[int]) -> Any:
    """``joined`` (outputs in the order ``indices`` were read) with every tensor and list
    of one row per sample put in dataset order; unchanged when already in order."""
    n = len(indices)
    if indices == sorted(indices):
        return joined
    if len(set(indices)) != n:
        warnings.warn(
            f"predict(): the sampler gave {n} indices with repeats, so the outputs cannot be "
            f"put in dataset order; they come in the sampler's order",
            stacklevel=user_stacklevel(),
        )
        return joined
    perm = sorted(range(n), key=indices.__getitem__)

    def reorder(leaf: Any) -> Any:
        if isinstance(leaf, torch.Tensor) and leaf.ndim and leaf.shape[0] == n:
            return leaf[torch.tensor(perm, device=leaf.device)]
        if isinstance(leaf, HeadColumns):  # one tensor per head, a row per sample in each
            return HeadColumns(reorder(column) for column in leaf)
        if isinstance(leaf, list) and len(leaf) == n:
            return [leaf[i] for i in perm]
        return leaf

    return map_leaves(joined, reorder)
