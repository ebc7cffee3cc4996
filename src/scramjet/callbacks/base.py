"""Callback events, the base class, and the dispatcher.

The loop, drawn as the order in which hooks (Trainer methods) and events (callback
methods) run. A callback event always runs *after* the hook of the same name, so a hook
can update state that a callback then reads::

    train_dl = create_train_dataloader();  eval_dl = create_eval_dataloader()
    scheduler = create_scheduler()
    training_run_start();                  on_training_run_start
    for epoch in range(num_epochs):
        train_epoch_start();               on_train_epoch_start
        for batch in train_dl:
            on_train_step_start
            batch_output = calculate_train_batch_loss(batch)
            on_train_step_end(batch, batch_output)
            backward_step(batch_output["loss"] / micro-batches in the window)
                (if it raises: recover_backward_step redoes the step or re-raises)
            if end of an accumulation window:
                clip_gradients(); optimizer_step(); scheduler_step(); optimizer_zero_grad()
                on_optimizer_step_end
        train_epoch_end();                 on_train_epoch_end
        evaluation_run_start();            on_evaluation_run_start     (only if eval data)
        eval_epoch_start();                on_eval_epoch_start
        for batch in eval_dl:
            on_eval_step_start
            batch_output = calculate_eval_batch_loss(batch)
            on_eval_step_end(batch, batch_output)
        eval_epoch_end();                  on_eval_epoch_end
        evaluation_run_end();              on_evaluation_run_end
        on_training_run_epoch_end
    training_run_end();                    on_training_run_end

``on_init_end`` runs once at the end of ``Trainer.__init__``; ``on_stop_training_error``
runs when a callback raises :class:`StopTrainingError` (the run then ends cleanly).
``Trainer.evaluate`` runs the evaluation part alone.
"""

from __future__ import annotations

import difflib
import enum
import inspect
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scramjet.trainer import Trainer


class Event(str, enum.Enum):
    """Every point of the loop where callbacks are called (see the module docstring)."""

    INIT_END = "on_init_end"
    TRAINING_RUN_START = "on_training_run_start"
    TRAIN_EPOCH_START = "on_train_epoch_start"
    TRAIN_STEP_START = "on_train_step_start"
    TRAIN_STEP_END = "on_train_step_end"
    OPTIMIZER_STEP_END = "on_optimizer_step_end"
    TRAIN_EPOCH_END = "on_train_epoch_end"
    EVALUATION_RUN_START = "on_evaluation_run_start"
    EVAL_EPOCH_START = "on_eval_epoch_start"
    EVAL_STEP_START = "on_eval_step_start"
    EVAL_STEP_END = "on_eval_step_end"
    EVAL_EPOCH_END = "on_eval_epoch_end"
    EVALUATION_RUN_END = "on_evaluation_run_end"
    TRAINING_RUN_EPOCH_END = "on_training_run_epoch_end"
    TRAINING_RUN_END = "on_training_run_end"
    STOP_TRAINING_ERROR = "on_stop_training_error"


#: Events called once per batch: dispatch skips callbacks that don't override them.
PER_STEP_EVENTS = frozenset(
    {
        Event.TRAIN_STEP_START.value,
        Event.TRAIN_STEP_END.value,
        Event.OPTIMIZER_STEP_END.value,
        Event.EVAL_STEP_START.value,
        Event.EVAL_STEP_END.value,
    }
)

#: Names used in pytorch-accelerated's README, accepted as documented aliases.
ALIASES: dict[str, str] = {
    "on_train_run_begin": Event.TRAINING_RUN_START.value,
    "on_train_epoch_begin": Event.TRAIN_EPOCH_START.value,
    "on_train_step_begin": Event.TRAIN_STEP_START.value,
    "on_eval_epoch_begin": Event.EVAL_EPOCH_START.value,
    "on_eval_step_begin": Event.EVAL_STEP_START.value,
    "on_train_run_end": Event.TRAINING_RUN_END.value,
}


#: When each event fires, for the errors that point a method name to an event.
_WHEN = {
    Event.TRAINING_RUN_START.value: "once, as train() starts",
    Event.TRAINING_RUN_END.value: "once, as train() ends",
    Event.TRAIN_EPOCH_START.value: "as each epoch starts",
    Event.TRAINING_RUN_EPOCH_END.value: (
        "after each epoch's training and evaluation; 'on_train_epoch_end' fires before the "
        "evaluation"
    ),
    Event.TRAIN_STEP_START.value: "before each training batch",
    Event.TRAIN_STEP_END.value: "after each training batch's loss, with batch and batch_output",
    Event.OPTIMIZER_STEP_END.value: "after each optimizer update",
    Event.EVALUATION_RUN_START.value: "as each evaluation starts",
    Event.EVALUATION_RUN_END.value: "after each evaluation",
    Event.EVAL_STEP_END.value: "after each evaluation batch",
}

#: Method names of other training libraries' callbacks (Keras, Hugging Face, Lightning)
#: and the event that fires at the same point here. Not accepted as aliases (their
#: arguments differ), but named in the error: by spelling alone the closest event can
#: fire elsewhere ('on_epoch_end' is closest to 'on_eval_epoch_end', which never fires
#: without evaluation data; 'on_train_start' to 'on_train_step_start', every batch).
_OTHER_LIBRARY_NAMES: dict[str, str] = {
    **dict.fromkeys(
        ("on_train_begin", "on_train_start", "on_fit_start"), Event.TRAINING_RUN_START.value
    ),
    **dict.fromkeys(("on_train_end", "on_fit_end"), Event.TRAINING_RUN_END.value),
    **dict.fromkeys(("on_epoch_begin", "on_epoch_start"), Event.TRAIN_EPOCH_START.value),
    "on_epoch_end": Event.TRAINING_RUN_EPOCH_END.value,
    **dict.fromkeys(
        (
            "on_step_begin",
            "on_step_start",
            "on_batch_begin",
            "on_batch_start",
            "on_train_batch_begin",
            "on_train_batch_start",
        ),
        Event.TRAIN_STEP_START.value,
    ),
    **dict.fromkeys(("on_batch_end", "on_train_batch_end"), Event.TRAIN_STEP_END.value),
    **dict.fromkeys(
        ("on_step_end", "on_optimizer_step", "on_before_zero_grad"),
        Event.OPTIMIZER_STEP_END.value,
    ),
    **dict.fromkeys(
        ("on_validation_start", "on_test_begin", "on_test_start"),
        Event.EVALUATION_RUN_START.value,
    ),
    **dict.fromkeys(
        ("on_evaluate", "on_validation_end", "on_validation_epoch_end", "on_test_end"),
        Event.EVALUATION_RUN_END.value,
    ),
    **dict.fromkeys(
        ("on_validation_batch_end", "on_test_batch_end", "on_prediction_step"),
        Event.EVAL_STEP_END.value,
    ),
}


def _name_hint(attr: str, candidates: Iterable[str]) -> str:
    """The event a wrong ``on_*`` name most likely meant, in a sentence."""
    event = _OTHER_LIBRARY_NAMES.get(attr)
    if event is None:
        return f" The closest event is {_closest(attr, candidates)!r}."
    return (
        f" {attr!r} is another library's name; the event at that point here is {event!r} "
        f"({_WHEN[event]})."
    )


class StopTrainingError(Exception):
    """Raise from a callback to end the training run cleanly after the current step.

    The Trainer calls ``on_stop_training_error`` on every callback, then finishes the run
    (``training_run_end`` and ``on_training_run_end`` still run). The error is kept in
    ``trainer.stop_reason``.

    Across processes, a stop raised on one rank in the middle of an epoch is held until
    the ranks agree on it (within about a second, at an optimizer update, or at the epoch's
    end), then every rank stops at the same step; raised with ``every_rank=True``, it stops
    at once.

    Attributes:
        reraise: raise the error from ``train()`` once the run has ended cleanly (False by
            default: ``train()`` just returns).
        every_rank: the callback raises it on every rank at the same step (from a value
            every rank shares, or agreed across the processes, as
            :class:`TerminateOnNaNCallback` does): the Trainer stops at once instead of
            holding it for the ranks to agree (False by default).
    """

    reraise: bool = False
    every_rank: bool = False

    def __init__(
        self, *args: object, reraise: bool | None = None, every_rank: bool | None = None
    ) -> None:
        super().__init__(*args)
        if reraise is not None:
            self.reraise = reraise
        if every_rank is not None:
            self.every_rank = every_rank


class CallbackError(RuntimeError):
    """A callback raised while handling an event; the message names both."""


class TrainerCallback:
    """Base class for callbacks: one no-op method per :class:`Event`.

    Override the events you need. Every method receives the trainer and keyword
    arguments (``batch`` and ``batch_output`` for the step-end events, ``error`` for
    ``on_stop_training_error``). Callbacks hold infrastructure (logging, checkpoints,
    stopping); they should not change the maths of a step — subclass ``Trainer`` for that.

    A method whose name starts with ``on_`` but is not an event (nor a documented alias,
    nor a custom event declared in ``custom_events``) is rejected when the callback is
    registered, so a typo never silently disables a callback.

    Example:
        >>> class CountSteps(TrainerCallback):
        ...     def __init__(self):
        ...         self.steps = 0
        ...     def on_train_step_end(self, trainer, batch, batch_output, **kwargs):
        ...         self.steps += 1
        >>> CountSteps().steps
        0
    """

    #: Extra event names this callback handles, fired with ``trainer.callback_handler.call_event``.
    custom_events: tuple[str, ...] = ()

    #: Events in which this callback writes a checkpoint of the run. In those events it
    #: runs after every callback that does not, whatever the order of the list, so the
    #: checkpoint holds the state all of them reached (early stopping's count, EMA weights).
    checkpoint_events: frozenset[str] = frozenset()

    def on_init_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """End of ``Trainer.__init__``."""

    def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Start of ``train()``, after ``training_run_start``."""

    def on_train_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Start of a training epoch, after ``train_epoch_start``."""

    def on_train_step_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Before ``calculate_train_batch_loss``."""

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """After ``calculate_train_batch_loss``; receives ``batch`` and ``batch_output``."""

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """After each optimizer update (optimizer, scheduler, zero_grad)."""

    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """End of a training epoch, after ``train_epoch_end``."""

    def on_evaluation_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Start of an evaluation run (in ``train()`` and in ``evaluate()``)."""

    def on_eval_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Start of an evaluation epoch, after ``eval_epoch_start``."""

    def on_eval_step_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Before ``calculate_eval_batch_loss``."""

    def on_eval_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """After ``calculate_eval_batch_loss``; receives ``batch`` and ``batch_output``."""

    def on_eval_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """End of an evaluation epoch, after ``eval_epoch_end``."""

    def on_evaluation_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """End of an evaluation run."""

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """End of one epoch of a training run, after training and evaluation."""

    def on_training_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """End of ``train()``, after ``training_run_end``."""

    def on_stop_training_error(self, trainer: Trainer, **kwargs: Any) -> None:
        """A callback raised :class:`StopTrainingError`; receives ``error``."""

    def state_dict(self) -> dict[str, Any]:
        """State to save in a training checkpoint (default: nothing)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""

    def close(self) -> None:
        """Release threads, displays or files when a run fails with an exception.

        Not an event: the end-of-run events do not run after a crash, so this is where a
        callback stops what it started. The default does nothing.
        """


EVENT_NAMES: frozenset[str] = frozenset(e.value for e in Event)


def _closest(name: str, candidates: Iterable[str]) -> str:
    """The candidate most similar to ``name`` (always one, however far)."""
    ranked = sorted(
        candidates,
        key=lambda c: (-difflib.SequenceMatcher(None, name, c).ratio(), c),
    )
    return ranked[0]


def _event_methods(callback: TrainerCallback, known: frozenset[str]) -> dict[str, str]:
    """Map each event the callback overrides to the attribute implementing it.

    Raises ValueError for an ``on_*`` method that matches no known event or alias.
    """
    declared = set(getattr(callback, "custom_events", ()))
    valid = known | declared
    found: dict[str, str] = {}
    for attr in dir(type(callback)):
        if not attr.startswith("on_") or not callable(getattr(callback, attr, None)):
            continue
        event = ALIASES.get(attr, attr)
        if event not in valid:
            hint = _name_hint(attr, valid | set(ALIASES))
            raise ValueError(
                f"Callback {type(callback).__name__} defines {attr!r}, which is not a Trainer "
                f"event.{hint} Rename it to an event from scramjet.callbacks.Event, or declare "
                f"it in `custom_events` if you fire it yourself."
            )
        base_impl = getattr(TrainerCallback, event, None)
        impl = getattr(type(callback), attr)
        if base_impl is not None and impl is base_impl:
            continue  # not overridden: skip at dispatch
        if event in found and found[event] != attr:
            raise ValueError(
                f"Callback {type(callback).__name__} defines both {found[event]!r} and {attr!r}, "
                f"which are the same event; keep one."
            )
        found[event] = attr
    return found


def _built(kind: type[TrainerCallback]) -> TrainerCallback:
    """An instance of a callback class passed as such (its constructor takes no argument)."""
    try:
        return kind()
    except TypeError as error:
        if "argument" not in str(error):
            raise
        raise TypeError(
            f"callbacks received the class {kind.__name__}, which the Trainer builds with no "
            f"argument, but its constructor needs some ({error}). Pass an instance instead: "
            f"callbacks=[{kind.__name__}(...)] with its arguments."
        ) from error


class CallbackHandler:
    """Holds the callbacks of a Trainer and calls them in order for each event.

    For each event it keeps only the callbacks that override it, so a callback that
    does not care about per-step events adds no per-step cost.
    """

    def __init__(
        self,
        callbacks: Iterable[TrainerCallback | type[TrainerCallback]] = (),
        custom_events: Sequence[str] = (),
    ) -> None:
        self.callbacks: list[TrainerCallback] = []
        self._known = EVENT_NAMES | frozenset(custom_events)
        self._table: dict[str, list[tuple[TrainerCallback, Any]]] = {}
        #: Set by the Trainer while a run has several processes: a callback's stop raised in
        #: an event without ``agree`` is handed to it (held until the ranks agree on it),
        #: with whether it counts as ``stop_training()`` (see ``_record_stop``).
        self.hold_stop: Callable[[StopTrainingError, bool], None] | None = None
        for cb in callbacks:
            self.add_callback(cb)

    def register_event(self, name: str) -> None:
        """Declare a custom event name that callbacks may implement."""
        if not name.startswith("on_"):
            raise ValueError(f"Event names start with 'on_'; received {name!r}.")
        self._known = self._known | {name}

    def add_callback(self, callback: TrainerCallback | type[TrainerCallback]) -> TrainerCallback:
        """Register a callback (an instance, or a class with a no-argument constructor).

        Returns the registered instance.
        """
        if inspect.isclass(callback) and issubclass(callback, TrainerCallback):
            callback = _built(callback)
        if not isinstance(callback, TrainerCallback):
            received = (
                f"the class {callback.__name__}"
                if inspect.isclass(callback)
                else type(callback).__name__
            )
            raise TypeError(
                f"Callbacks must be TrainerCallback instances; received {received}. "
                f"Subclass scramjet.callbacks.TrainerCallback."
            )
        methods = _event_methods(callback, self._known)
        self.callbacks.append(callback)
        for event, attr in methods.items():
            entries = self._table.setdefault(event, [])
            at = len(entries)
            if event not in callback.checkpoint_events:  # before those that checkpoint here
                savers = (i for i, (cb, _) in enumerate(entries) if event in cb.checkpoint_events)
                at = next(savers, at)
            entries.insert(at, (callback, getattr(callback, attr)))
        return callback

    def get(self, kind: type[TrainerCallback]) -> TrainerCallback | None:
        """The first registered callback of the given type, or None."""
        return next((cb for cb in self.callbacks if isinstance(cb, kind)), None)

    def close_all(self, trainer: Trainer) -> None:
        """Call ``close`` on every callback after a failed run; their errors become warnings."""
        for callback in self.callbacks:
            try:
                callback.close()
            except Exception as exc:  # never hide the error that ended the run
                warnings.warn(
                    f"Callback {type(callback).__name__}.close raised {type(exc).__name__}: {exc}",
                    stacklevel=2,
                )

    def has(self, event: str) -> bool:
        """Whether any callback handles ``event`` (cheap check for hot loops)."""
        return event in self._table

    def call_event(
        self,
        event: str,
        trainer: Trainer,
        *,
        agree: Callable[[StopTrainingError | None], StopTrainingError | None] | None = None,
        **kwargs: Any,
    ) -> None:
        """Call ``event`` on every callback that implements it, in registration order
        (those that write a checkpoint in ``event`` last: see ``checkpoint_events``).

        A callback that raises :class:`StopTrainingError` stops the run after the event:
        the callbacks after it still get the event (the last epoch's metrics are printed
        and its checkpoint written), then the first such error is raised. The stop counts
        as ``trainer.stop_training()`` (unless the callback keeps its own state in checkpoints,
        as early stopping does): the checkpoint written records it, so the same run again
        with ``resume_from="auto"`` stops too.

        ``agree`` (the Trainer's, across processes) is called once, before the callbacks
        that write a checkpoint in ``event``, with this process's stop; it returns the stop
        the processes agreed on, so the checkpoint records a stop another rank decided. In
        other events, while ``hold_stop`` is set, a stop not raised on every rank alike
        (``every_rank``) is handed to it instead of raised.
        """
        entries = self._table.get(event, [])
        if not entries and agree is None:
            return
        stop: StopTrainingError | None = None
        agreed = agree is None
        holding = agree is None and self.hold_stop is not None
        deferred: list[TrainerCallback] = []  # held stops are recorded when the ranks agree
        for callback, method in entries:
            if agree is not None and not agreed and event in callback.checkpoint_events:
                stop, agreed = agree(stop), True
            try:
                method(trainer, **kwargs)
            except StopTrainingError as exc:
                stop = stop or exc
                if holding:
                    deferred.append(callback)
                else:
                    _record_stop(trainer, callback, exc)
            except Exception as exc:
                name = str(getattr(event, "value", event))
                written = getattr(method, "__name__", name)
                where = name if written == name else f"{written} (event {name})"
                raise CallbackError(
                    f"Callback {type(callback).__name__} raised {type(exc).__name__} in "
                    f"{where}: {exc}"
                ) from exc
        if not agreed and agree is not None:
            stop = agree(stop)
        if stop is None:
            return
        if holding and self.hold_stop is not None and not stop.every_rank:
            self.hold_stop(stop, any(_counts_as_stop_training(cb, stop) for cb in deferred))
            return
        for callback in deferred:
            _record_stop(trainer, callback, stop)
        raise stop


def _counts_as_stop_training(callback: TrainerCallback, stop: StopTrainingError) -> bool:
    """A callback that keeps no state of its own in checkpoints: its stop is recorded as
    ``stop_training()``, so that a rerun of the run stops too. Not a stop that ``train()``
    raises as an error (``reraise``: ``TerminateOnNaNCallback``'s ``TrainingNaNError``): the
    run failed, and a rerun resumes from its last checkpoint to meet the failure again or
    train on, instead of loading the stop, training nothing and exiting as a success."""
    return type(callback).state_dict is TrainerCallback.state_dict and not stop.reraise


def _record_stop(trainer: Trainer, callback: TrainerCallback, stop: StopTrainingError) -> None:
    """Mark the run stopped in its counters, as ``stop_training()`` does, so that the same
    run again with ``resume_from="auto"`` stops too. A callback that keeps its own state in
    the checkpoint (``EarlyStoppingCallback``) judges that rerun from it (a larger patience
    trains on); a stand-in trainer without counters (a compat layer's) has nothing to mark."""
    if not _counts_as_stop_training(callback, stop):
        return
    state = getattr(trainer, "state", None)
    if state is not None and hasattr(state, "stop_requested"):
        state.stop_requested = True
