"""AIToolbox's learning-rate schedulers as callbacks over ``torch.optim.lr_scheduler``.

A scheduler callback builds its torch scheduler on the TrainLoop's optimizer when it is
registered and steps it at every epoch's end (``BatchUpdate...`` ones: after every
training batch). ``state_dict``/``load_state_dict`` are the torch scheduler's, which is
what the model checkpoints save under ``schedulers_state_dict``.
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Integral
from typing import Any

from torch.optim import lr_scheduler

from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import AbstractCallback

__all__ = [
    "AbstractScheduler",
    "BatchUpdateGeneralLRSchedulerCallback",
    "GeneralLRSchedulerCallback",
    "LambdaLRScheduler",
    "MultiStepLRScheduler",
    "ReduceLROnPlateauMetricScheduler",
    "ReduceLROnPlateauScheduler",
    "StepLRScheduler",
]


class AbstractScheduler:
    """Holds a torch scheduler in :attr:`scheduler` and exposes its state."""

    def __init__(self) -> None:
        self.scheduler: Any = None

    def state_dict(self) -> dict[str, Any]:
        """The torch scheduler's state."""
        if self.scheduler is None:
            raise RuntimeError(
                f"{type(self).__name__} has no scheduler yet: it is built when the callback is "
                f"registered in a TrainLoop (fit(callbacks=[...]))."
            )
        state: dict[str, Any] = self.scheduler.state_dict()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the torch scheduler's state."""
        self.scheduler.load_state_dict(state_dict)


class GeneralLRSchedulerCallback(AbstractScheduler, AbstractCallback):
    """Any ``torch.optim.lr_scheduler`` class, stepped at every epoch's end.

    Args:
        scheduler_class: e.g. ``torch.optim.lr_scheduler.ExponentialLR``.
        optimizer_idx: with several optimizers (``MultiOptimizer``), which one to schedule.
        **kwargs: the scheduler's arguments other than the optimizer.
    """

    def __init__(
        self, scheduler_class: type[Any], optimizer_idx: int | None = None, **kwargs: Any
    ) -> None:
        AbstractCallback.__init__(self, "General learning-rate scheduler")
        AbstractScheduler.__init__(self)
        self.scheduler_class, self.optimizer_idx, self.scheduler_args = (
            scheduler_class,
            optimizer_idx,
            kwargs,
        )

    def register_train_loop_object(self, train_loop_obj: Any) -> AbstractCallback:
        """Attach the loop and build the torch scheduler on its optimizer."""
        optimizer = train_loop_obj.optimizer
        if self.optimizer_idx is not None:
            optimizer = optimizer[self.optimizer_idx]
        self.scheduler = self.scheduler_class(optimizer, **self.scheduler_args)
        return super().register_train_loop_object(train_loop_obj)

    def on_epoch_end(self) -> None:
        """Step."""
        self.scheduler.step()


class BatchUpdateGeneralLRSchedulerCallback(GeneralLRSchedulerCallback):
    """:class:`GeneralLRSchedulerCallback` stepped after every training batch instead."""

    def on_epoch_end(self) -> None:
        """Nothing at the epoch's end."""

    def on_batch_end(self) -> None:
        """Step."""
        self.scheduler.step()


class ReduceLROnPlateauScheduler(GeneralLRSchedulerCallback):
    """``ReduceLROnPlateau`` on the validation loss (``val_loss`` of the history, else computed).

    ``**kwargs`` are ``ReduceLROnPlateau``'s (``factor``, ``patience``, ...).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(lr_scheduler.ReduceLROnPlateau, **kwargs)

    def on_epoch_end(self) -> None:
        """Step with this epoch's validation loss."""
        loop = self.train_loop_obj
        history = loop.train_history
        if "val_loss" in history and len(history["val_loss"]) > 0:
            value = history["val_loss"][-1]
        else:
            value = loop.evaluate_loss_on_validation_set(float_dict_format=True)
        self.scheduler.step(value)


class ReduceLROnPlateauMetricScheduler(GeneralLRSchedulerCallback):
    """``ReduceLROnPlateau`` on the latest value of ``metric_name`` in the history.

    Args:
        metric_name: the history metric (list the callback computing it first).
        **kwargs: ``ReduceLROnPlateau``'s arguments (``mode="max"`` for accuracies).
    """

    def __init__(self, metric_name: str, **kwargs: Any) -> None:
        super().__init__(lr_scheduler.ReduceLROnPlateau, **kwargs)
        self.metric_name = metric_name

    def on_epoch_end(self) -> None:
        """Step with the metric's latest value."""
        history = self.train_loop_obj.train_history
        if self.metric_name not in history or not len(history[self.metric_name]):
            raise ValueError(
                f"ReduceLROnPlateauMetricScheduler: {self.metric_name!r} has no value in the "
                f"training history ({list(history.keys())}); list the callback that computes "
                f"it before the scheduler."
            )
        self.scheduler.step(history[self.metric_name][-1])


class LambdaLRScheduler(GeneralLRSchedulerCallback):
    """``LambdaLR``: the learning rate is the initial one times ``lr_lambda_list(epoch)``."""

    def __init__(self, lr_lambda_list: Callable[[int], float] | list[Any], **kwargs: Any) -> None:
        super().__init__(lr_scheduler.LambdaLR, lr_lambda=lr_lambda_list, **kwargs)


class StepLRScheduler(GeneralLRSchedulerCallback):
    """``StepLR``: multiply the learning rate by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, step_size: int, **kwargs: Any) -> None:
        if isinstance(step_size, bool) or not isinstance(step_size, Integral) or step_size < 1:
            raise ValueError(
                f"StepLRScheduler: step_size must be a whole number of epochs >= 1; received "
                f"{step_size!r}. Pass e.g. step_size=10 to decay the learning rate every 10 "
                f"epochs."
            )
        super().__init__(lr_scheduler.StepLR, step_size=step_size, **kwargs)


class MultiStepLRScheduler(GeneralLRSchedulerCallback):
    """``MultiStepLR``: multiply the learning rate by ``gamma`` at each listed epoch."""

    def __init__(self, milestones_list: list[int], **kwargs: Any) -> None:
        super().__init__(lr_scheduler.MultiStepLR, milestones=milestones_list, **kwargs)
