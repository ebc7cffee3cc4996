"""AIToolbox callbacks and schedulers on a real TrainLoop: stopping rules, hooks, LR schedules."""

from __future__ import annotations

import pytest
import torch
from aitb_helpers import MyNeuralModel, loaders
from torch import nn

from scramjet.compat.aitoolbox.torchtrain.callbacks.basic import (
    EarlyStopping,
    FunctionOnTrainLoop,
    ThresholdEarlyStopping,
)
from scramjet.compat.aitoolbox.torchtrain.schedulers.warmup import LinearWithWarmupScheduler
from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoop


def _loop() -> TrainLoop:
    torch.manual_seed(0)
    model = MyNeuralModel()
    train, val, test = loaders()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return TrainLoop(model, train, val, test, opt, nn.CrossEntropyLoss())


def _feed(callback, name: str, values: list[float]) -> list[bool]:
    loop = _loop()
    loop.callbacks_handler.register_callbacks([callback])
    out = []
    for v in values:
        loop.insert_metric_result_into_history(name, v)
        callback.on_epoch_end()
        out.append(loop.early_stop)
        loop.epoch += 1
    return out


@pytest.mark.parametrize(
    ("name", "values", "delta", "patience", "expected"),
    [
        ("val_loss", [10.0, 9.4, 9.0], 1.0, 1, [False, False, True]),  # 1.0 is not > delta
        ("val_loss", [10.0, 9.4, 8.9], 1.0, 1, [False, False, False]),  # vs the best, not last
        ("val_error", [1.0, 2.0], 0.0, 0, [False, True]),  # 'error' → lower is better
        ("val_acc", [9.0, 9.0, 10.0, 10.1], 1.0, 2, [False, False, False, False]),
        ("val_acc", [9.0, 9.0, 10.0, 10.0], 1.0, 2, [False, False, False, True]),
    ],
)
def test_early_stopping_follows_aitoolbox_rules(name, values, delta, patience, expected) -> None:
    stop = EarlyStopping(monitor=name, min_delta=delta, patience=patience)
    assert _feed(stop, name, values) == expected


def test_early_stopping_state_round_trips_and_names_missing_metric() -> None:
    stop = EarlyStopping(monitor="val_loss", patience=3)
    _feed(stop, "val_loss", [5.0, 6.0])
    again = EarlyStopping(monitor="val_loss", patience=3)
    again.load_state_dict(stop.state_dict())
    assert (again.best_performance, again.patience_count, again.best_epoch) == (5.0, 2, 0)
    loop = _loop()
    missing = EarlyStopping(monitor="val_f1")
    loop.callbacks_handler.register_callbacks([missing])
    with pytest.raises(ValueError, match="val_f1"):
        missing.on_epoch_end()


def test_threshold_early_stopping_counts_epochs_past_the_bound() -> None:
    cb = ThresholdEarlyStopping(monitor="dummy_loss", threshold=0.65, patience=3)
    loop = _loop()
    loop.callbacks_handler.register_callbacks([cb])
    counts = []
    for v in [0.8, 0.8, 0.71, 0.7, 0.65]:
        loop.insert_metric_result_into_history("dummy_loss", v)
        cb.on_epoch_end()
        counts.append(cb.patience_count)
    assert counts == [2, 1, 0, -1, 3] and loop.early_stop


def test_early_stopping_ends_a_real_fit_and_function_hook_runs() -> None:
    loop = _loop()
    seen: list[int] = []
    loop.fit(
        num_epochs=8,
        callbacks=[
            EarlyStopping(monitor="val_loss", min_delta=10.0, patience=0),
            FunctionOnTrainLoop(lambda tl: seen.append(tl.epoch), epoch_end=True),
        ],
    )
    assert len(loop.train_history["val_loss"]) == 2 and len(seen) == 2


def test_linear_warmup_scheduler_sets_the_learning_rate_per_batch() -> None:
    loop = _loop()
    sched = LinearWithWarmupScheduler(num_warmup_steps=2, num_training_steps=12)
    loop.fit(num_epochs=1, callbacks=[sched])  # 6 batches of 16
    # after 6 steps: step 6 is past warm-up, factor (12 - 6) / (12 - 2) = 0.6
    assert loop.optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * 0.6)
    assert sched.state_dict()["last_epoch"] == 6
    with pytest.raises(ValueError, match="num_training_steps"):
        LinearWithWarmupScheduler(num_warmup_steps=5, num_training_steps=3)
