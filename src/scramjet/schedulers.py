"""Step-based, stateful learning-rate schedulers and the Trainer's placeholder values.

A scheduler often needs numbers only the Trainer knows (how many optimizer updates an
epoch has once the data is sharded across processes and accumulated). Pass
:class:`TrainerPlaceholderValues` (optionally in simple arithmetic) inside a
``functools.partial``; the Trainer resolves them when it creates the scheduler — by
evaluating a small expression tree, never by ``eval`` of strings.

Example:
    >>> from functools import partial
    >>> import torch
    >>> fn = CosineWarmupScheduler.create_scheduler_fn(num_warmup_epochs=1)
    >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    >>> values = {"num_epochs": 3, "num_update_steps_per_epoch": 10, "total_update_steps": 30}
    >>> sched = resolve_placeholders(fn, values)(opt)
    >>> sched.total_steps, sched.warmup_steps
    (30, 10)
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import operator
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import torch
from torch.optim.lr_scheduler import LRScheduler


class _Expr:
    """A lazy arithmetic expression over placeholder values."""

    def resolve(self, values: Mapping[str, Any]) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _bin(self, other: Any, op: Callable[[Any, Any], Any], reverse: bool = False) -> _Expr:
        return _BinOp(other, self, op) if reverse else _BinOp(self, other, op)

    def __add__(self, o: Any) -> _Expr:
        return self._bin(o, operator.add)

    def __radd__(self, o: Any) -> _Expr:
        return self._bin(o, operator.add, True)

    def __sub__(self, o: Any) -> _Expr:
        return self._bin(o, operator.sub)

    def __rsub__(self, o: Any) -> _Expr:
        return self._bin(o, operator.sub, True)

    def __mul__(self, o: Any) -> _Expr:
        return self._bin(o, operator.mul)

    def __rmul__(self, o: Any) -> _Expr:
        return self._bin(o, operator.mul, True)

    def __floordiv__(self, o: Any) -> _Expr:
        return self._bin(o, operator.floordiv)

    def __truediv__(self, o: Any) -> _Expr:
        return self._bin(o, operator.truediv)

    def __rfloordiv__(self, o: Any) -> _Expr:
        return self._bin(o, operator.floordiv, True)

    def __rtruediv__(self, o: Any) -> _Expr:
        return self._bin(o, operator.truediv, True)

    def __mod__(self, o: Any) -> _Expr:
        return self._bin(o, operator.mod)

    def __rmod__(self, o: Any) -> _Expr:
        return self._bin(o, operator.mod, True)

    def __pow__(self, o: Any) -> _Expr:
        return self._bin(o, operator.pow)

    def __rpow__(self, o: Any) -> _Expr:
        return self._bin(o, operator.pow, True)

    def __neg__(self) -> _Expr:
        return _BinOp(0, self, operator.sub)

    # What cannot be deferred: a number is needed now, and the placeholder has none yet.
    def _no_value(self, what: str) -> TypeError:
        return TypeError(
            f"{what} received {self!r}, which has no value yet: the Trainer fills in "
            f"TrainerPlaceholderValues only among the arguments of a functools.partial given "
            f"as create_scheduler_fn, e.g. partial(OneCycleLR, max_lr=0.1, "
            f"total_steps=TrainerPlaceholderValues.TOTAL_UPDATE_STEPS). A lambda or function "
            f"receives the placeholder itself, and int(), round(), max() or comparisons cannot "
            f"use it before it is filled in: keep to + - * / // % ** inside the partial."
        )

    def __int__(self) -> int:
        raise self._no_value("int()")

    def __float__(self) -> float:
        raise self._no_value("float()")

    def __index__(self) -> int:
        raise self._no_value("an integer index")

    def __round__(self, ndigits: int | None = None) -> int:
        raise self._no_value("round()")

    def __lt__(self, o: Any) -> bool:
        raise self._no_value("a comparison (<)")

    def __le__(self, o: Any) -> bool:
        raise self._no_value("a comparison (<=)")

    def __gt__(self, o: Any) -> bool:
        raise self._no_value("a comparison (>)")

    def __ge__(self, o: Any) -> bool:
        raise self._no_value("a comparison (>=)")


class _BinOp(_Expr):
    def __init__(self, left: Any, right: Any, op: Callable[[Any, Any], Any]) -> None:
        self.left, self.right, self.op = left, right, op

    def resolve(self, values: Mapping[str, Any]) -> Any:
        return self.op(_resolve(self.left, values), _resolve(self.right, values))

    def __repr__(self) -> str:
        symbol = _SYMBOLS.get(self.op, "?")
        if self.op is operator.sub and self.left == 0 and not isinstance(self.left, _Expr):
            return f"(-{self.right!r})"
        return f"({self.left!r} {symbol} {self.right!r})"


_SYMBOLS = {
    operator.add: "+",
    operator.sub: "-",
    operator.mul: "*",
    operator.truediv: "/",
    operator.floordiv: "//",
    operator.mod: "%",
    operator.pow: "**",
}


class _Placeholder(_Expr):
    def __init__(self, key: str) -> None:
        self.key = key

    def resolve(self, values: Mapping[str, Any]) -> Any:
        if self.key not in values:
            raise ValueError(
                f"Placeholder {self.key!r} has no value here; available: {sorted(values)}."
            )
        if self.key in values.get(_UNKNOWN, ()):
            fix = (
                "pass max_num_train_steps=N to train()"
                if self.key == "total_update_steps"
                else "give the training dataset a __len__"
            )
            raise ValueError(
                f"{self!r} is unknown here: the training data has no length (an "
                f"IterableDataset without __len__, or a generator), so the number of updates "
                f"cannot be counted ahead; resolving it would give the scheduler 0. To fix it, "
                f"{fix}, or build the scheduler with explicit step counts."
            )
        return values[self.key]

    def __repr__(self) -> str:
        return f"TrainerPlaceholderValues.{self.key.upper()}"


class TrainerPlaceholderValues:
    """Values the Trainer fills in when it creates the scheduler."""

    NUM_EPOCHS = _Placeholder("num_epochs")
    NUM_UPDATE_STEPS_PER_EPOCH = _Placeholder("num_update_steps_per_epoch")
    TOTAL_UPDATE_STEPS = _Placeholder("total_update_steps")
    PER_PROCESS_BATCH_SIZE = _Placeholder("per_process_batch_size")
    EVAL_PER_PROCESS_BATCH_SIZE = _Placeholder("eval_per_process_batch_size")
    GRADIENT_ACCUMULATION_STEPS = _Placeholder("gradient_accumulation_steps")
    NUM_PROCESSES = _Placeholder("num_processes")
    TRAIN_DATALOADER_LEN = _Placeholder("train_dataloader_len")
    EVAL_DATALOADER_LEN = _Placeholder("eval_dataloader_len")


def _resolve(value: Any, values: Mapping[str, Any]) -> Any:
    """Resolve placeholders, also inside lists, tuples, sets and dicts (e.g. milestones)."""
    if isinstance(value, _Expr):
        return value.resolve(values)
    if isinstance(value, list | tuple | set | frozenset):
        items = [_resolve(v, values) for v in value]
        if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
            return type(value)(*items)
        return type(value)(items)
    if isinstance(value, dict):
        return type(value)((k, _resolve(v, values)) for k, v in value.items())
    return value


_UNKNOWN = "__unknown__"  # key, in the values, of the names whose value is unknown


def resolve_placeholders(
    fn: Callable[..., Any], values: Mapping[str, Any], unknown: frozenset[str] = frozenset()
) -> Callable[..., Any]:
    """Replace placeholder values in a ``functools.partial``'s arguments (nested too).

    A placeholder named in ``unknown`` (a length the Trainer cannot know) is an error
    that says how to give it a value, except for the schedulers defined here, which
    check their step counts themselves and say the same.
    """
    if not isinstance(fn, functools.partial):
        return fn
    if unknown and not _checks_its_own_steps(fn):
        values = {**values, _UNKNOWN: unknown}
    args = tuple(_resolve(a, values) for a in fn.args)
    kwargs = {k: _resolve(v, values) for k, v in fn.keywords.items()}
    return functools.partial(resolve_placeholders(fn.func, values), *args, **kwargs)


def _checks_its_own_steps(fn: Callable[..., Any]) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return isinstance(fn, type) and issubclass(fn, _StepScheduler)


def _check_factor(name: str, value: float) -> None:
    """A multiplier of the base learning rate must be a finite number ≥ 0."""
    if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
        raise ValueError(
            f"{name} must be a finite number ≥ 0 (a multiple of the base learning rate); "
            f"received {value!r}, which would make learning rates negative or NaN (SGD then "
            f"climbs the loss). Pass e.g. {name}=0.0."
        )


def _check_called(cls: type, received: object) -> None:
    """``create_scheduler_fn=X.create_scheduler_fn`` without parentheses: the Trainer
    called the factory with its optimizer."""
    if received is not None:
        name = cls.__name__
        raise TypeError(
            f"{name}.create_scheduler_fn received {type(received).__name__} as an argument: "
            f"it was given to the Trainer uncalled, so the Trainer called it with the "
            f"optimizer. Call it to get the function: create_scheduler_fn={name}."
            f"create_scheduler_fn(num_warmup_epochs=1) (its arguments are keywords)."
        )


def _check_warmup_epochs(cls: type, epochs: object) -> None:
    """``num_warmup_epochs`` of a ``create_scheduler_fn``: checked where it is given, not
    when ``train()`` rounds it to updates."""
    if isinstance(epochs, bool) or not (
        isinstance(epochs, numbers.Real) and math.isfinite(epochs) and float(epochs) >= 0
    ):
        raise ValueError(
            f"{cls.__name__}.create_scheduler_fn: num_warmup_epochs must be a finite number "
            f"≥ 0 (epochs of warm-up, fractions allowed); received {epochs!r}. Pass e.g. "
            f"num_warmup_epochs=1, or 0 for no warm-up."
        )


class _StepScheduler(LRScheduler):
    """Base: a multiplier of the base learning rate, as a pure function of the step.

    Every parameter group follows it, also one added to the optimizer after the scheduler
    was built (layers unfrozen mid-run): its base is the learning rate it was added with.
    """

    total_steps: int

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        total_steps: int | None,
        warmup_steps: int,
        warmup_start_factor: float,
        last_epoch: int = -1,
    ) -> None:
        if total_steps is None:
            name = type(self).__name__
            raise TypeError(
                f"{name} needs total_steps (the run's optimizer updates) and received none, "
                f"e.g. because create_scheduler_fn={name} was passed as is. Pass "
                f"create_scheduler_fn={name}.create_scheduler_fn(num_warmup_epochs=...), or "
                f"functools.partial({name}, total_steps=TrainerPlaceholderValues."
                f"TOTAL_UPDATE_STEPS), and the Trainer fills in the length."
            )
        if total_steps < 1:
            raise ValueError(
                f"total_steps must be ≥ 1; received {total_steps}. With a training dataset "
                f"that has no length the Trainer cannot count the run's updates: pass "
                f"max_num_train_steps to train(), or give the scheduler total_steps yourself."
            )
        if not 0 <= warmup_steps <= total_steps:
            raise ValueError(
                f"warmup_steps must be between 0 and total_steps ({total_steps} optimizer "
                f"updates); received {warmup_steps}. With create_scheduler_fn(num_warmup_epochs="
                f"...), the warmup is that many epochs of updates: lower num_warmup_epochs, or "
                f"make the run longer (num_epochs, max_num_train_steps)."
            )
        _check_factor("warmup_start_factor", warmup_start_factor)
        _check_factor("min_lr_ratio", getattr(self, "min_lr_ratio", 0.0))
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)
        self.warmup_start_factor = float(warmup_start_factor)
        super().__init__(optimizer, last_epoch)

    def factor(self, step: int) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def _warmup(self, step: int) -> float:
        frac = step / self.warmup_steps
        return self.warmup_start_factor + (1.0 - self.warmup_start_factor) * frac

    def adopt_new_groups(self) -> None:
        """Groups added to the optimizer since the last step (layers unfrozen mid-run,
        ``ModelFreezer.unfreeze``'s use) follow the schedule from the learning rate they
        were added with, from their first update on: the Trainer calls this before each
        optimizer step (a new group would otherwise take one update at its raw rate)."""
        added = self.optimizer.param_groups[len(self.base_lrs) :]
        if not added:
            return
        f = self.factor(min(max(self.last_epoch, 0), self.total_steps))
        for group in added:
            base = float(group.setdefault("initial_lr", group["lr"]))
            self.base_lrs.append(base)
            group["lr"] = base * f
        self._last_lr = [float(g["lr"]) for g in self.optimizer.param_groups]

    def get_lr(self) -> list[float]:  # type: ignore[override]
        self.adopt_new_groups()
        f = self.factor(min(self.last_epoch, self.total_steps))
        return [float(base) * f for base in self.base_lrs]


class CosineWarmupScheduler(_StepScheduler):
    """Linear warmup, then cosine decay to ``min_lr_ratio`` × the base learning rate.

    Call ``step()`` once per optimizer update (the Trainer does).
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        total_steps: int | None = None,
        warmup_steps: int = 0,
        *,
        warmup_start_factor: float = 0.0,
        min_lr_ratio: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        self.min_lr_ratio = float(min_lr_ratio)
        super().__init__(optimizer, total_steps, warmup_steps, warmup_start_factor, last_epoch)

    def factor(self, step: int) -> float:
        """LR multiplier at ``step``."""
        if step < self.warmup_steps:
            return self._warmup(step)
        span = max(1, self.total_steps - self.warmup_steps)
        progress = (step - self.warmup_steps) / span
        cos = 0.5 * (1.0 + math.cos(math.pi * progress))
        return self.min_lr_ratio + (1.0 - self.min_lr_ratio) * cos

    @classmethod
    def create_scheduler_fn(
        cls,
        _uncalled: object = None,
        /,
        *,
        num_warmup_epochs: float = 0,
        warmup_start_factor: float = 0.0,
        min_lr_ratio: float = 0.0,
    ) -> functools.partial[Any]:
        """A ``create_scheduler_fn`` for ``Trainer.train`` with epochs counted by the Trainer."""
        _check_called(cls, _uncalled)
        _check_warmup_epochs(cls, num_warmup_epochs)
        steps = TrainerPlaceholderValues.NUM_UPDATE_STEPS_PER_EPOCH
        kwargs: dict[str, Any] = dict(  # placeholders stand in for ints until resolved
            total_steps=TrainerPlaceholderValues.TOTAL_UPDATE_STEPS,
            warmup_steps=_WarmupSteps(steps, num_warmup_epochs),
            warmup_start_factor=warmup_start_factor,
            min_lr_ratio=min_lr_ratio,
        )
        return functools.partial(cls, **kwargs)


class WSDScheduler(_StepScheduler):
    """Warmup–stable–decay: linear warmup, a constant plateau, then a final decay.

    ``decay_fraction`` of the total steps is spent decaying to ``min_lr_ratio`` with the
    chosen shape (``"linear"``, ``"cosine"`` or ``"sqrt"``). The decay lasts
    ``decay_fraction × total_steps`` updates rounded to the nearest integer, halves up
    (0.5 × 5 = 2.5 → 3; the fraction is taken as written, 0.1 is exactly a tenth), so it grows
    by at most one update per update of the run; the plateau is what warm-up and decay leave.
    """

    SHAPES = ("linear", "cosine", "sqrt")

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        total_steps: int | None = None,
        warmup_steps: int = 0,
        *,
        decay_fraction: float = 0.2,
        decay_shape: str = "linear",
        warmup_start_factor: float = 0.0,
        min_lr_ratio: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        if decay_shape not in self.SHAPES:
            raise ValueError(f"decay_shape must be one of {self.SHAPES}; received {decay_shape!r}.")
        if not 0.0 <= decay_fraction <= 1.0:
            raise ValueError(f"decay_fraction must be in [0, 1]; received {decay_fraction}.")
        # total_steps None: the base class says what to pass
        self.decay_steps = _nearest_half_up((total_steps or 0), decay_fraction)
        self.decay_shape = decay_shape
        self.min_lr_ratio = float(min_lr_ratio)
        super().__init__(optimizer, total_steps, warmup_steps, warmup_start_factor, last_epoch)
        if self.warmup_steps + self.decay_steps > self.total_steps:
            raise ValueError(
                f"warmup_steps ({self.warmup_steps}) + decay steps ({self.decay_steps}) exceed "
                f"total_steps ({self.total_steps}); lower one of them."
            )

    def factor(self, step: int) -> float:
        """LR multiplier at ``step``."""
        if step < self.warmup_steps:
            return self._warmup(step)
        decay_start = self.total_steps - self.decay_steps
        if step < decay_start or self.decay_steps == 0:
            return 1.0
        p = (step - decay_start) / self.decay_steps
        if self.decay_shape == "linear":
            left = 1.0 - p
        elif self.decay_shape == "cosine":
            left = 0.5 * (1.0 + math.cos(math.pi * p))
        else:
            left = 1.0 - math.sqrt(p)
        return self.min_lr_ratio + (1.0 - self.min_lr_ratio) * left

    @classmethod
    def create_scheduler_fn(
        cls,
        _uncalled: object = None,
        /,
        *,
        num_warmup_epochs: float = 0,
        decay_fraction: float = 0.2,
        decay_shape: str = "linear",
        warmup_start_factor: float = 0.0,
        min_lr_ratio: float = 0.0,
    ) -> functools.partial[Any]:
        """A ``create_scheduler_fn`` for ``Trainer.train``."""
        _check_called(cls, _uncalled)
        _check_warmup_epochs(cls, num_warmup_epochs)
        steps = TrainerPlaceholderValues.NUM_UPDATE_STEPS_PER_EPOCH
        kwargs: dict[str, Any] = dict(  # placeholders stand in for ints until resolved
            total_steps=TrainerPlaceholderValues.TOTAL_UPDATE_STEPS,
            warmup_steps=_WarmupSteps(steps, num_warmup_epochs),
            decay_fraction=decay_fraction,
            decay_shape=decay_shape,
            warmup_start_factor=warmup_start_factor,
            min_lr_ratio=min_lr_ratio,
        )
        return functools.partial(cls, **kwargs)


def _nearest_half_up(total: int, fraction: float) -> int:
    """``fraction × total`` to the nearest integer, halves up: ``round`` would send halves
    to the even neighbour (2.5 → 2, 3.5 → 4), and the float product can miss a half by an ulp
    (the fraction is read as its shortest decimal, ``0.1`` as ``1/10``)."""
    return math.floor(int(total) * Fraction(str(float(fraction))) + Fraction(1, 2))


class _WarmupSteps(_Expr):
    """``ceil(updates per epoch * warmup epochs)``; an error when the epoch length is unknown."""

    def __init__(self, steps_per_epoch: _Expr, epochs: float) -> None:
        self.steps_per_epoch, self.epochs = steps_per_epoch, epochs

    def resolve(self, values: Mapping[str, Any]) -> Any:
        per_epoch = _resolve(self.steps_per_epoch, values)
        if self.epochs and not per_epoch:
            raise ValueError(
                f"num_warmup_epochs={self.epochs} needs the number of updates per epoch, which "
                f"is unknown for a training dataset without a length. Give the dataset a "
                f"__len__, or build the scheduler with warmup_steps=... (optimizer updates)."
            )
        # exact: 1.1 epochs of 50 updates is 55 (the float product 55.00000000000001 made 56)
        return math.ceil(int(per_epoch) * Fraction(str(float(self.epochs))))


def check_step_takes_no_arguments(scheduler: object) -> None:
    """The loop calls ``scheduler.step()`` once per update: a ``step`` that needs an
    argument (``ReduceLROnPlateau``'s metric) would fail after the first update."""
    try:
        parameters = inspect.signature(scheduler.step).parameters.values()  # type: ignore[attr-defined]
    except (AttributeError, TypeError, ValueError):  # no step, or a builtin: call and see
        return
    required = [
        p.name
        for p in parameters
        if p.default is inspect.Parameter.empty
        and p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    if required:
        name = type(scheduler).__name__
        raise TypeError(
            f"create_scheduler_fn built a {name}, whose step() needs "
            f"{', '.join(repr(r) for r in required)}; the Trainer calls scheduler.step() with no "
            f"argument after every optimizer update. Step it yourself once per epoch instead: "
            f"create it over trainer.optimizer in a callback and, in on_training_run_epoch_end, "
            f"call scheduler.step(trainer.run_history.get_latest_metric('eval_loss_epoch')) "
            f"(return its state from the callback's state_dict for an exact resume). "
            f"Overriding Trainer.scheduler_step to pass a value suits only a value known "
            f"after every optimizer update (the last batch's loss): an epoch metric is not "
            f"recorded before the first epoch ends, and patience would count updates, not "
            f"epochs."
        )


def adopt_new_learning_rates(
    optimizer: torch.optim.Optimizer,
    rates_at_end: Sequence[float | None] | None,
    scheduled: bool = True,
) -> None:
    """Where the next ``train()``'s schedule starts. ``rates_at_end``: the groups' rates
    when the previous run ended (None before a first run); ``scheduled``: the next run
    builds a scheduler.

    A rate set by hand between the two calls is the new peak: torch's schedulers start
    from a group's ``initial_lr``, which an earlier run's scheduler left at that run's
    peak, so it is set to the hand-set rate. A rate that is still the one the previous run
    ended with restarts from that peak: the group's ``lr`` is put back to ``initial_lr``
    too, since torch's chainable schedulers (``CosineAnnealingLR``, ``StepLR``,
    ``LinearLR``...) start from the group's current ``lr`` (a cosine that ended at 0 would
    train a second run at 0). Without a scheduler the rate stays as the run left it."""
    if rates_at_end is None:
        return
    for group, ended in zip(optimizer.param_groups, rates_at_end, strict=False):
        if "initial_lr" not in group or "lr" not in group:
            continue
        if group["lr"] != ended:
            group["initial_lr"] = group["lr"]
        elif scheduled:
            group["lr"] = group["initial_lr"]
