"""What ``trainer.log`` and ``trainer.log_dict`` do with a value.

A value logged while the training loop runs its batches (a hook such as
``calculate_train_batch_loss`` or ``optimizer_step``, or a step event such as
``on_train_step_end`` and ``on_optimizer_step_end``) is a *step* value: it belongs to the
optimizer update in progress (the one ``train_loss`` of the same batch is recorded at) and
goes to the listeners (an :class:`~scramjet.tracking.Experiment` and its loggers). Nobody
listening, a step value is dropped at once: logging costs nothing without a tracker.

A value logged anywhere else (``on_train_epoch_end``, the evaluation, after the run) is an
*epoch* value: it is appended to ``trainer.run_history`` under its name, where callbacks
(early stopping, checkpoint ranking, progress lines) and the Experiment's epoch rows read
it. ``step=`` makes any value a step value at that step.

``reduce=`` combines the value over the processes of a distributed run (``"mean"``,
``"sum"``, ``"max"``, ``"min"``): a collective, so every process must log it.
"""

from __future__ import annotations

import numbers
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import torch

from scramjet.runtime import distributed as dist
from scramjet.tracking._params import plain_results

if TYPE_CHECKING:
    from scramjet.trainer import Trainer

#: ``listener(step, values, wall_time)``: step values, as tensors (no device sync) or floats.
StepListener = Callable[[int, dict[str, "torch.Tensor | float"], float], None]

_REDUCE_OPS = ("mean", "sum", "max", "min")


class MetricLog:
    """The Trainer's logging entry point: step values to listeners, epoch values to history."""

    def __init__(self) -> None:
        self._listeners: list[StepListener] = []

    @property
    def listening(self) -> bool:
        """Whether any listener receives step values."""
        return bool(self._listeners)

    def subscribe(self, listener: StepListener) -> None:
        """Send step values to ``listener`` from now on (once, however often subscribed)."""
        if listener not in self._listeners:
            self._listeners.append(listener)

    def unsubscribe(self, listener: StepListener) -> None:
        """Stop sending step values to ``listener``."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    def log(
        self,
        trainer: Trainer,
        values: Mapping[str, Any],
        step: int | None,
        reduce: str | None,
        in_step: int | None,
    ) -> None:
        """Record ``values``; ``in_step`` is the update in progress while the loop runs the
        training batches, None elsewhere."""
        if step is None and in_step is None:
            self._log_epoch(trainer, values, reduce)
            return
        if not self._listeners:
            return
        at = _check_step(step) if step is not None else int(in_step or 0)
        checked = {_check_name(k): _value(v, reduce, trainer.device) for k, v in values.items()}
        now = time.time()
        for listener in list(self._listeners):
            listener(at, checked, now)

    @staticmethod
    def _log_epoch(trainer: Trainer, values: Mapping[str, Any], reduce: str | None) -> None:
        for name, value in values.items():
            _check_name(name)
            reduced = _value(value, reduce, trainer.device)
            # a float32 tensor's value as its shortest float32 decimal, as the step rows have it
            trainer.run_history.update_metric(name, float(plain_results(reduced)))


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name or name.strip() != name:
        raise ValueError(
            f"trainer.log needs a metric name: a non-empty string without surrounding spaces; "
            f"received {name!r}. Use a name such as 'grad_norm' or 'val/accuracy'."
        )
    return name


def _check_step(step: Any) -> int:
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(
            f"trainer.log(step=...) must be an int ≥ 0 (an optimizer step); received {step!r}. "
            f"Leave it out to use the update in progress."
        )
    return step


def _is_one_element_array(value: Any) -> bool:
    """A NumPy array (or array-like with ``size`` and ``item``) holding one real number."""
    if (
        getattr(value, "size", None) != 1
        or not hasattr(value, "item")
        or not hasattr(value, "dtype")
    ):
        return False
    kind = getattr(value.dtype, "kind", "")
    return kind in ("i", "u", "f")


def _value(value: Any, reduce: str | None, device: torch.device) -> torch.Tensor | float:
    """A detached scalar tensor (no device sync) or a float; reduced over processes if asked."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(
                f"trainer.log received a tensor of shape {tuple(value.shape)}; expected one "
                f"value. Reduce it first, e.g. tensor.mean()."
            )
        out: torch.Tensor | float = value.detach().reshape(())
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        # Python numbers and NumPy scalars (np.float32, np.int64, ...); a float32 one as its
        # shortest float32 decimal (0.3, not 0.30000001192092896)
        out = float(plain_results(value))
    elif _is_one_element_array(value):
        out = float(
            plain_results(value.reshape(-1)[0]) if hasattr(value, "reshape") else value.item()
        )
    else:
        raise TypeError(
            f"trainer.log received a value of type {type(value).__name__}; expected a number "
            f"(int, float, a NumPy scalar) or a one-element tensor or array. Convert it with "
            f"float(value) or log a tensor."
        )
    if reduce is None:
        return out
    if reduce not in _REDUCE_OPS:
        raise ValueError(
            f"trainer.log(reduce=...) must be one of {_REDUCE_OPS} or None; received {reduce!r}."
        )
    if not dist.is_distributed():
        return out
    tensor = out if isinstance(out, torch.Tensor) else torch.tensor(out, device=device)
    return dist.reduce(tensor.float(), op=reduce)  # type: ignore[arg-type]


__all__ = ["MetricLog", "StepListener"]
