"""The event set, aliases, misspellings, custom events, error reporting and dispatch skipping."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from tests.common.world import Recorder, TinyMLP, blobs, make_trainer

from scramjet import Trainer
from scramjet.callbacks import (
    ALIASES,
    PER_STEP_EVENTS,
    CallbackError,
    CallbackHandler,
    Event,
    TrainerCallback,
)


def test_callback_methods_match_events() -> None:
    methods = {
        name
        for name, member in inspect.getmembers(TrainerCallback, inspect.isfunction)
        if name.startswith("on_")
    }
    assert methods == {e.value for e in Event}


def test_seed_004_callback_names_are_all_accepted() -> None:
    """Every callback name of seed 004's README is an event or a documented alias."""
    seed_names = [
        "on_init_end",
        "on_train_run_begin",
        "on_train_run_end",
        "on_stop_training_error",
        "on_train_epoch_begin",
        "on_train_step_begin",
        "on_train_step_end",
        "on_train_epoch_end",
        "on_eval_epoch_begin",
        "on_eval_step_begin",
        "on_eval_step_end",
        "on_eval_epoch_end",
    ]
    events = {e.value for e in Event}
    for name in seed_names:
        assert name in events or ALIASES.get(name) in events, name


def test_aliases_are_called() -> None:
    log: list[str] = []
    trainer = make_trainer(TinyMLP(), callbacks=[Recorder(log)])
    trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=4, eval_dataset=blobs(n=4))
    for alias in ALIASES:
        assert alias in log, alias


def test_alias_and_event_together_are_rejected() -> None:
    class Both(TrainerCallback):
        def on_train_run_begin(self, trainer: Trainer, **kwargs: Any) -> None: ...

        def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None: ...

    with pytest.raises(ValueError, match="same event; keep one"):
        CallbackHandler([Both()])


def test_misspelled_method_raises_at_registration() -> None:
    class Typo(TrainerCallback):
        def on_train_epoch_ned(self, trainer: Trainer, **kwargs: Any) -> None: ...

    with pytest.raises(
        ValueError,
        match=r"Typo defines 'on_train_epoch_ned'.*The closest event is 'on_train_epoch_end'\.",
    ):
        make_trainer(TinyMLP(), callbacks=[Typo()])
    trainer = make_trainer(TinyMLP())
    with pytest.raises(ValueError, match="on_train_epoch_end"):
        trainer.add_callback(Typo)


def test_a_name_far_from_every_event_still_gets_the_closest_one() -> None:
    class Far(TrainerCallback):
        def on_foo(self, trainer: Trainer, **kwargs: Any) -> None: ...

    with pytest.raises(ValueError, match=r"'on_foo'.*The closest event is 'on_[a-z_]+'\."):
        make_trainer(TinyMLP(), callbacks=[Far()])


def test_custom_events_declared_on_trainer_and_callback() -> None:
    class MyTrainer(Trainer):
        custom_events = ("on_batch_mixed",)

        def train_epoch_end(self) -> None:
            super().train_epoch_end()
            self.callback_handler.call_event("on_batch_mixed", self, amount=3)
            self.callback_handler.call_event("on_own_event", self)

    class Listener(TrainerCallback):
        custom_events = ("on_own_event",)

        def __init__(self) -> None:
            self.got: list[Any] = []

        def on_batch_mixed(self, trainer: Trainer, **kwargs: Any) -> None:
            self.got.append(kwargs["amount"])

        def on_own_event(self, trainer: Trainer, **kwargs: Any) -> None:
            self.got.append("own")

    listener = Listener()
    trainer = make_trainer(TinyMLP(), callbacks=[listener], trainer_cls=MyTrainer)
    trainer.train(blobs(n=8), num_epochs=2, per_device_batch_size=4)
    assert listener.got == [3, "own", 3, "own"]

    class Unknown(TrainerCallback):
        def on_batch_mixed(self, trainer: Trainer, **kwargs: Any) -> None: ...

    with pytest.raises(ValueError, match="custom_events"):
        make_trainer(TinyMLP(), callbacks=[Unknown()])  # a plain Trainer has no such event
    handler = CallbackHandler()
    handler.register_event("on_batch_mixed")
    handler.add_callback(Unknown())
    assert handler.has("on_batch_mixed")
    with pytest.raises(ValueError, match="start with 'on_'"):
        handler.register_event("batch_mixed")


def test_exception_in_callback_names_callback_and_event() -> None:
    class Broken(TrainerCallback):
        def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
            raise KeyError("missing_metric")

    trainer = make_trainer(TinyMLP(), callbacks=[Broken()])
    with pytest.raises(
        CallbackError, match=r"Broken raised KeyError in on_train_epoch_end: 'missing_metric'"
    ) as info:
        trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=4)
    assert isinstance(info.value.__cause__, KeyError)


def test_callbacks_that_do_not_override_per_step_events_are_skipped() -> None:
    class EpochOnly(TrainerCallback):
        def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None: ...

    class StepEnd(TrainerCallback):
        def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None: ...

    idle, epoch_only, step_end = TrainerCallback(), EpochOnly(), StepEnd()
    handler = CallbackHandler([idle, epoch_only, step_end])
    table = handler._table
    assert [cb for cb, _ in table[Event.TRAIN_STEP_END.value]] == [step_end]
    assert [cb for cb, _ in table[Event.TRAIN_EPOCH_END.value]] == [epoch_only]
    for event in PER_STEP_EVENTS - {Event.TRAIN_STEP_END.value}:
        assert event not in table and not handler.has(event)
    assert all(idle is not cb for entries in table.values() for cb, _ in entries)
    assert handler.callbacks == [idle, epoch_only, step_end]


def test_callback_classes_are_instantiated_and_order_is_kept() -> None:
    trainer = make_trainer(TinyMLP(), callbacks=[Recorder, TrainerCallback()])
    assert isinstance(trainer.callbacks[0], Recorder)
    assert trainer.callback_handler.get(Recorder) is trainer.callbacks[0]


def test_default_callbacks_are_fresh_per_trainer() -> None:
    from scramjet import DEFAULT_CALLBACKS

    model = TinyMLP()
    import torch

    a = Trainer(model, None, torch.optim.SGD(model.parameters(), lr=0.1))
    b = Trainer(model, None, torch.optim.SGD(model.parameters(), lr=0.1))
    assert [type(cb) for cb in a.callbacks] == list(DEFAULT_CALLBACKS)
    assert all(x is not y for x, y in zip(a.callbacks, b.callbacks))


def test_close_runs_on_every_callback_after_a_crash() -> None:
    class Closing(TrainerCallback):
        def __init__(self) -> None:
            self.closed = 0

        def close(self) -> None:
            self.closed += 1

    class BadClose(TrainerCallback):
        def close(self) -> None:
            raise OSError("disk gone")

    class Crash(TrainerCallback):
        def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
            raise ZeroDivisionError("bad step")

    closing = Closing()
    trainer = make_trainer(TinyMLP(), callbacks=[BadClose(), Crash(), closing])
    warns = pytest.warns(UserWarning, match="BadClose.close raised OSError: disk gone")
    raises = pytest.raises(CallbackError, match="Crash raised ZeroDivisionError in on_train_step")
    with warns, raises:
        trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=4)
    assert closing.closed == 1
    make_trainer(TinyMLP(), callbacks=[closing]).train(blobs(n=8), num_epochs=1)
    assert closing.closed == 1, "close is not called after a run that ends normally"


def test_a_callback_that_checkpoints_in_an_event_runs_after_the_others_there() -> None:
    # A checkpoint written before a later callback (early stopping, EMA) handled the same
    # event held that callback's state from the event before: a resume then diverged.
    calls: list[str] = []

    class Saver(TrainerCallback):
        checkpoint_events = frozenset({"on_optimizer_step_end"})

        def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
            calls.append("saver step")

        def on_training_run_start(self, trainer: Any, **kwargs: Any) -> None:
            calls.append("saver start")

    class Other(TrainerCallback):
        def __init__(self, name: str) -> None:
            self.name = name

        def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
            calls.append(f"{self.name} step")

        def on_training_run_start(self, trainer: Any, **kwargs: Any) -> None:
            calls.append(f"{self.name} start")

    handler = CallbackHandler([Saver(), Other("a"), Other("b")])
    handler.call_event("on_training_run_start", None)  # type: ignore[arg-type]
    handler.call_event("on_optimizer_step_end", None)  # type: ignore[arg-type]
    assert calls == ["saver start", "a start", "b start", "a step", "b step", "saver step"]
