"""The result-package interface: metrics computed from all predictions of a dataset."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from scramjet.runtime import distributed as dist
from scramjet.runtime.stacklevel import user_stacklevel
from scramjet.trainer.batch import (
    LOGITS_KEY,
    PAD_VALUE,
    TARGET_KEYS,
    concat_outputs,
    logits_of,
    output_field,
)

if TYPE_CHECKING:
    from scramjet.trainer import Trainer

#: What the class names of Hugging Face causal language models' outputs hold
#: (``CausalLMOutput``, ``CausalLMOutputWithPast``, ``MoeCausalLMOutputWithPast``, ...).
CAUSAL_OUTPUT = "CausalLMOutput"


class ResultPackage:
    """Computes a group of metrics from predictions and targets.

    Subclasses implement :meth:`compute`. Packages combine with ``+``:
    ``ClassificationResults() + BinaryResults()`` returns one package whose result dict
    merges both. :meth:`evaluate` runs ``trainer.predict`` — which gathers predictions
    across processes in dataset order, exactly one per sample, without padding — and
    computes the package on every rank.
    """

    #: Prefix-free name used in reports.
    name = "results"

    def compute(
        self, y_pred: Any, y_true: Any, metadata: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Metric values for predictions ``y_pred`` and targets ``y_true``."""
        raise NotImplementedError

    def __call__(
        self, y_pred: Any, y_true: Any, metadata: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        return self.compute(y_pred, y_true, metadata)

    def __add__(self, other: ResultPackage) -> CombinedResults:
        if not isinstance(other, ResultPackage):
            return NotImplemented
        return CombinedResults([self, other])

    def evaluate(
        self,
        trainer: Trainer,
        dataset: Any,
        per_device_batch_size: int = 64,
        targets: Any = None,
        collate_fn: Callable[..., Any] | None = None,
    ) -> dict[str, Any]:
        """Predict ``dataset`` with ``trainer`` and compute the package.

        Args:
            trainer: a :class:`~scramjet.Trainer`.
            dataset: a map-style dataset of ``(inputs, target)`` samples, or of dict samples
                (Hugging Face style) whose target is under ``labels`` (or ``label``,
                ``targets``, ``target``, ``y``).
            per_device_batch_size: prediction batch size.
            targets: the targets; by default those of the batches ``predict`` runs: with a
                ``collate_fn`` (this one, else the last ``train()``'s), each sample's row of
                the very batch it was predicted in, so a target padded on the left, or made
                by the collate function (``labels`` of a ``DataCollatorForLanguageModeling``,
                its random masking included), lines up with its prediction; otherwise each
                sample's own target. Targets of
                different lengths are padded at the end with -100, as ``predict`` pads
                outputs.
            collate_fn: passed to ``trainer.predict`` (e.g. a ``DataCollatorWithPadding``
                for samples of different lengths).

        A model output with ``logits`` (a Hugging Face ``ModelOutput``, a dict) is scored
        on its logits, as :meth:`compute` does.
        """
        if targets is None and not (
            hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")
        ):
            raise TypeError(
                f"{type(self).__name__}.evaluate reads each sample's target by its index, so "
                f"dataset must be map-style (__getitem__ and __len__); received "
                f"{type(dataset).__name__}. Pass the dataset itself (not a DataLoader or a "
                f"stream), or pass the targets in dataset order with targets=."
            )
        given = targets is not None
        collate = collate_fn or getattr(trainer, "_train_collate_fn", None)
        recorder = _TargetRecorder(collate) if targets is None and collate is not None else None
        y_pred = trainer.predict(
            dataset, per_device_batch_size=per_device_batch_size, collate_fn=recorder or collate_fn
        )
        if recorder is not None:
            # The targets of the batches the model saw: a collate function that draws at
            # random (masking) would give other targets if called again.
            targets = recorder.targets(len(dataset))
            if targets is None:
                targets = _collated_targets(dataset, recorder.collate_fn, per_device_batch_size)
        if targets is None:
            targets = [_target_of(dataset[i], i) for i in range(len(dataset))]
            if targets and all(isinstance(t, torch.Tensor) for t in targets):
                targets = concat_outputs([t.unsqueeze(0) for t in targets])
        try:
            return self.compute(y_pred, targets)
        except ValueError as exc:
            hint = _padding_hint(y_pred, targets) if given else None
            if hint is None:
                raise
            raise ValueError(f"{type(self).__name__}.evaluate: {hint} ({exc})") from exc


class CombinedResults(ResultPackage):
    """Several packages computed together; their result dicts are merged in order."""

    name = "combined"

    def __init__(self, packages: Sequence[ResultPackage]) -> None:
        self.packages: list[ResultPackage] = []
        for package in packages:
            if isinstance(package, CombinedResults):
                self.packages.extend(package.packages)
            elif isinstance(package, ResultPackage):
                self.packages.append(package)
            else:
                raise TypeError(
                    f"CombinedResults takes ResultPackage objects; received {type(package).__name__}."
                )

    def compute(
        self, y_pred: Any, y_true: Any, metadata: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Every package's results, merged (later packages win on equal names)."""
        out: dict[str, Any] = {}
        for package in self.packages:
            out.update(package.compute(y_pred, y_true, metadata))
        return out


def _batch_target(batch: Any, size: int) -> torch.Tensor | None:
    """The target tensor of a collated batch of ``size`` samples (a dict batch's target key,
    or a tuple batch's second item), or None when it holds none with one row per sample."""
    if isinstance(batch, Mapping):
        key = next((k for k in TARGET_KEYS if k in batch), None)
        target = batch[key] if key is not None else None
    elif isinstance(batch, Sequence) and len(batch) >= 2:
        target = batch[1]
    else:
        target = None
    if not isinstance(target, torch.Tensor) or target.ndim == 0 or target.shape[0] != size:
        return None
    return target


class _TargetRecorder:
    """A collate function that keeps the target rows of every batch it makes.

    ``predict`` batches each process's share (``r, r + W, ...``) in order, in the training
    process, so the k-th call collates the k-th batch of that share; the recorded rows are
    then gathered across processes in dataset order.
    """

    def __init__(self, collate_fn: Callable[..., Any]) -> None:
        self.collate_fn = collate_fn
        self.rows: list[torch.Tensor] | None = []

    def __call__(self, samples: Any) -> Any:
        batch = self.collate_fn(samples)
        if self.rows is not None:
            target = _batch_target(batch, len(samples))
            if target is None:
                self.rows = None  # no target in this batch: the samples' own are used
            else:
                self.rows.extend(row.detach().cpu() for row in target)
        return batch

    def targets(self, n: int) -> torch.Tensor | None:
        """The rows recorded on every process, in dataset order (collective), or None when
        a batch held no target or the calls do not match the shares (the loader collated
        elsewhere, in worker processes say)."""
        rows, self.rows = self.rows, None  # the trainer keeps this collate_fn: free the rows
        world, rank = dist.get_world_size(), dist.get_rank()
        if rows is not None and len(rows) != len(range(rank, n, world)):
            rows = None
        shares = dist.gather_object(rows) if world > 1 else [rows]
        if any(share is None for share in shares):
            return None
        ordered: list[torch.Tensor] = [torch.empty(0)] * n
        for r, share in enumerate(shares):
            for i, row in zip(range(r, n, world), share or []):
                ordered[i] = row
        joined: torch.Tensor = concat_outputs([row.unsqueeze(0) for row in ordered])
        return joined


def _collated_targets(
    dataset: Any, collate_fn: Callable[..., Any], batch_size: int
) -> torch.Tensor | None:
    """The targets of ``dataset`` as ``predict`` batches it: each process's share (``r, r +
    W, ...``) in batches of ``batch_size`` through ``collate_fn``, each row taken from its
    collated batch, so it is padded (left or right) and aligned like that sample's
    predicted row, and rows of different lengths are padded at the end with -100 as
    ``predict`` pads its outputs. None when a collated batch holds no target tensor (the
    samples' own targets are used then)."""
    with torch.random.fork_rng(devices=[]):  # a random collate_fn leaves the run's draws alone
        return _collate_targets(dataset, collate_fn, batch_size)


def _collate_targets(
    dataset: Any, collate_fn: Callable[..., Any], batch_size: int
) -> torch.Tensor | None:
    n, world = len(dataset), dist.get_world_size()
    rows: list[torch.Tensor | None] = [None] * n
    for rank in range(min(world, n)):
        share = range(rank, n, world)
        for start in range(0, len(share), batch_size):
            indices = share[start : start + batch_size]
            target = _batch_target(collate_fn([dataset[i] for i in indices]), len(indices))
            if target is None:
                return None
            for i, row in zip(indices, target):
                rows[i] = row.detach().cpu()
    present = [row for row in rows if row is not None]
    if len(present) != n:
        return None
    joined: torch.Tensor = concat_outputs([row.unsqueeze(0) for row in present])
    return joined


def _padding_hint(y_pred: Any, targets: Any) -> str | None:
    """Why predictions and ``targets=`` given to ``evaluate`` differ in sequence length,
    when they do: the batches were padded (``pad_to_multiple_of``, a fixed ``max_length``)
    beyond the longest target; None when the shapes say nothing of the kind."""
    try:
        pred, target = as_tensor(y_pred, "y_pred"), as_tensor(targets, "targets")
    except (TypeError, ValueError):
        return None
    if pred.dim() < 2 or target.dim() < 2 or pred.shape[0] != target.shape[0]:
        return None
    if pred.shape[1] <= target.shape[1] or target.shape[1] < 2:
        return None
    return (
        f"the predictions have sequence length {pred.shape[1]} (shape {tuple(pred.shape)}) "
        f"but the targets given as targets= have {target.shape[1]} (shape "
        f"{tuple(target.shape)}): the collate function padded the batches beyond the "
        f"longest target (pad_to_multiple_of, or padding to a max_length). Leave targets= "
        f"out, so that each sample's target is read from the batch it was predicted in, "
        f"padded and aligned the same way; or pass targets padded as the batches were "
        f"(with -100 at the padded positions)"
    )


def _target_of(sample: Any, index: int) -> Any:
    """The target of one dataset sample: ``sample[1]``, or a dict sample's target key."""
    if isinstance(sample, Mapping):
        key = next((k for k in TARGET_KEYS if k in sample), None)
        if key is None:
            raise KeyError(
                f"evaluate: sample {index} is a dict without a target (keys: "
                f"{', '.join(map(repr, sample))}; looked for "
                f"{', '.join(map(repr, TARGET_KEYS))}). Name its target 'labels', or pass "
                f"targets= to evaluate."
            )
        value = sample[key]
    else:
        value = sample[1]
    return torch.as_tensor(value) if isinstance(value, list | int | float) else value


def as_tensor(value: Any, what: str) -> torch.Tensor:
    """Predictions or targets as a CPU tensor (lists and numpy arrays accepted; a model
    output with ``logits``, such as a Hugging Face ``ModelOutput`` or a dict, gives them, and
    so does a tuple of tensors such as ``(logits, ...)`` or ``(loss, logits, ...)``, as a
    Hugging Face model built with ``return_dict=False`` returns). A list with one row per
    sample whose lengths differ (token labels) is padded at the end with -100, as
    ``predict`` pads its outputs."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, tuple) and any(
        isinstance(item, torch.Tensor) and item.ndim for item in value
    ):
        return cast(torch.Tensor, logits_of(value, what)).detach().cpu()
    if isinstance(value, Mapping) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        found = output_field(value, LOGITS_KEY)
        if isinstance(found, torch.Tensor):
            return found.detach().cpu()
    try:
        if _same_shape_arrays(value):  # one array per sample (0-d ones included)
            return torch.as_tensor(np.stack(value))
        return torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as exc:
        failure = exc
    rows = _rows(value)
    if rows is None:
        raise TypeError(
            f"{what} must be a tensor, numpy array or list of numbers (or a list with one "
            f"such row per sample); received {type(value).__name__}."
        ) from failure
    try:  # one row per sample, of different lengths (token labels): padded as predict pads
        joined: torch.Tensor = concat_outputs([row.unsqueeze(0) for row in rows])
    except RuntimeError as exc:
        shapes = sorted({tuple(row.shape) for row in rows}, key=len)
        raise TypeError(
            f"{what} is a list of {len(rows)} rows whose shapes cannot be padded to one "
            f"(received shapes {', '.join(map(str, shapes[:4]))}); rows of different "
            f"lengths are padded at the end with {PAD_VALUE}, but need the same number "
            f"of dimensions. Pass one row per sample of the same rank."
        ) from exc
    return joined


def _same_shape_arrays(value: Any) -> bool:
    """Whether ``value`` is a non-empty list of numpy arrays of one shape (which
    ``torch.as_tensor`` refuses when they are 0-d, and converts slowly otherwise)."""
    if not isinstance(value, list) or not value:
        return False
    return all(isinstance(v, np.ndarray) for v in value) and len({v.shape for v in value}) == 1


def _rows(value: Any) -> list[torch.Tensor] | None:
    """A list of per-sample rows (tensors, arrays or lists of numbers, not scalars) as
    tensors, or None for anything else."""
    if not isinstance(value, list) or not value:
        return None
    rows: list[torch.Tensor] = []
    for item in value:
        if isinstance(item, str | bytes | Mapping) or not hasattr(item, "__len__"):
            return None
        try:
            row = item.detach().cpu() if isinstance(item, torch.Tensor) else torch.as_tensor(item)
        except (TypeError, ValueError, RuntimeError):
            return None
        if row.ndim == 0:
            return None
        rows.append(row)
    return rows


def warn_if_unshifted(y_pred: Any, shift_labels: bool | None, package: str) -> None:
    """Warn that a causal language model's output (a ``CausalLMOutput...``) is scored
    unshifted, unless ``shift_labels`` says how to score it."""
    if shift_labels is not None or CAUSAL_OUTPUT not in type(y_pred).__name__:
        return
    warnings.warn(
        f"{package} received a {type(y_pred).__name__}: a causal language model's logits "
        f"at position t predict the token at t + 1, but they are scored against the "
        f"target at t. Pass {package}(shift_labels=True) to score them as the model's own "
        f"loss does (or shift_labels=False to keep this scoring without the warning).",
        UserWarning,
        stacklevel=user_stacklevel(),
    )
