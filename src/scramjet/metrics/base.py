"""The result-package interface: metrics computed from all predictions of a dataset."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from scramjet.trainer import Trainer


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
        self, trainer: Trainer, dataset: Any, per_device_batch_size: int = 64, targets: Any = None
    ) -> dict[str, Any]:
        """Predict ``dataset`` with ``trainer`` and compute the package.

        Args:
            trainer: a :class:`~scramjet.Trainer`.
            dataset: a map-style dataset of ``(inputs, target)`` samples.
            per_device_batch_size: prediction batch size.
            targets: the targets; default ``dataset[i][1]`` for every sample.
        """
        y_pred = trainer.predict(dataset, per_device_batch_size=per_device_batch_size)
        if targets is None:
            targets = [dataset[i][1] for i in range(len(dataset))]
            if targets and isinstance(targets[0], torch.Tensor):
                targets = torch.stack(targets)
        return self.compute(y_pred, targets)


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


def as_tensor(value: Any, what: str) -> torch.Tensor:
    """Predictions or targets as a CPU tensor (lists and numpy arrays accepted)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    try:
        return torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TypeError(
            f"{what} must be a tensor, numpy array or list of numbers; received "
            f"{type(value).__name__}."
        ) from exc
