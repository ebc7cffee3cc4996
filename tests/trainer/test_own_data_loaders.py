"""A practitioner's own data with the Trainer: batch sizes, samplers and loaders of theirs.

Each test trains a tiny model on generated data and checks what the user would check:
the arguments they passed were honoured (or refused with an error that names the fix),
and the numbers are those of the same run written by hand.
"""

from __future__ import annotations

import multiprocessing
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Sampler, TensorDataset, WeightedRandomSampler

from scramjet import Trainer
from scramjet.callbacks import StopTrainingError, TrainerCallback

N = 24


def _data() -> TensorDataset:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(N, 4, generator=gen)
    return TensorDataset(x, x[:, :1] * 2.0)


def _trainer() -> Trainer:
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    return Trainer(
        model,
        loss_func=nn.MSELoss(),
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[],
        seed=0,
    )


class _Indexed(Dataset[tuple[torch.Tensor, torch.Tensor, int]]):
    """Sample ``i`` of :func:`_data` and its index, batched by :func:`_with_ids`."""

    def __init__(self) -> None:
        self.data = _data()

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        x, y = self.data[i]
        return x, y, i


def _with_ids(samples: list[Any]) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """A collate function of the user's: tensors stacked, the ids kept as a list."""
    return (
        torch.stack([s[0] for s in samples]),
        torch.stack([s[1] for s in samples]),
        [s[2] for s in samples],
    )


class _Pairs(Sampler[list[int]]):
    """A batch sampler of the user's: fixed batches of two neighbouring indices."""

    def __iter__(self) -> Any:
        return iter([[i, i + 1] for i in range(0, N, 2)])

    def __len__(self) -> int:
        return N // 2


# ----------------------------------------------------------------- numpy batch sizes
@pytest.mark.parametrize(
    "call",
    ["train", "train kwargs", "evaluate", "predict"],
)
def test_a_numpy_integer_batch_size_is_taken_as_that_int(call: str) -> None:
    # a batch size read from a config array or np.arange sweep is a numpy integer
    data, trainer, size = _data(), _trainer(), np.int64(5)
    if call == "train":
        trainer.train(data, num_epochs=1, per_device_batch_size=size)  # type: ignore[arg-type]
        assert trainer.run_config.train_per_device_batch_size == 5
        assert type(trainer.run_config.train_per_device_batch_size) is int
        assert trainer.state.global_step == 5  # ceil(24 / 5) batches
    elif call == "train kwargs":
        trainer.train(data, num_epochs=1, train_dataloader_kwargs={"batch_size": size})
        assert trainer.state.global_step == 5
    elif call == "evaluate":
        trainer.evaluate(data, per_device_batch_size=size)  # type: ignore[arg-type]
        assert trainer.run_history.get_latest_metric("eval_loss_epoch") > 0
    else:
        out = trainer.predict(data, per_device_batch_size=size)  # type: ignore[arg-type]
        assert torch.allclose(out, trainer.model(data.tensors[0]).detach())


def test_a_numpy_float_batch_size_is_still_refused() -> None:
    with pytest.raises(ValueError, match=r"per_device_batch_size must be a positive int"):
        _trainer().train(_data(), num_epochs=1, per_device_batch_size=np.float64(5.0))  # type: ignore[arg-type]


def test_a_numpy_integer_epoch_count_says_to_convert_it() -> None:
    with pytest.raises(ValueError, match=r"numpy integer.*int\(num_epochs\)"):
        _trainer().train(_data(), num_epochs=np.int64(2), per_device_batch_size=8)  # type: ignore[arg-type]


# ------------------------------------------------------------ shuffle with a sampler
@pytest.mark.parametrize("key", ["sampler", "batch_sampler"])
def test_shuffle_true_next_to_a_sampler_is_an_error_not_ignored(key: str) -> None:
    # torch's DataLoader refuses shuffle=True with a sampler; the Trainer dropped the
    # shuffle silently and trained in the sampler's order
    sampler: Any = WeightedRandomSampler(torch.ones(N), N) if key == "sampler" else _Pairs()
    trainer = _trainer()
    with pytest.raises(ValueError, match=rf"shuffle=True.*{key}.*Leave shuffle out"):
        trainer.train(
            _data(), num_epochs=1, train_dataloader_kwargs={key: sampler, "shuffle": True}
        )
    assert trainer.state.global_step == 0


def test_shuffle_false_next_to_a_sampler_keeps_the_samplers_order() -> None:
    trainer, seen = _trainer(), []
    original = trainer.calculate_train_batch_loss

    def record(batch: Any) -> Any:
        seen.extend(batch[2])
        return original(batch[:2])

    trainer.calculate_train_batch_loss = record  # type: ignore[method-assign]
    order = list(reversed(range(N)))
    trainer.train(
        _Indexed(),
        num_epochs=1,
        collate_fn=_with_ids,
        train_dataloader_kwargs={"sampler": order, "shuffle": False},
    )
    assert seen == order


# ------------------------------------- a DataLoader of the user's after train(collate_fn=)
def _trained_with_collate() -> Trainer:
    trainer = _trainer()
    original = trainer.calculate_train_batch_loss
    trainer.calculate_train_batch_loss = lambda batch: original(batch[:2])  # type: ignore[method-assign]
    trainer.train(_Indexed(), num_epochs=1, per_device_batch_size=8, collate_fn=_with_ids)
    return trainer


@pytest.mark.parametrize("call", ["evaluate", "predict"])
def test_a_ready_dataloader_is_evaluated_after_training_with_a_collate_fn(call: str) -> None:
    trainer = _trained_with_collate()
    loader = DataLoader(_data(), batch_size=5)  # its own default collate: (x, y) tuples
    if call == "evaluate":
        trainer.evaluate(loader)
        assert trainer.run_history.get_latest_metric("eval_loss_epoch") > 0
    else:
        out = trainer.predict(loader)
        assert torch.allclose(out, trainer.model(_data().tensors[0]).detach())


def test_a_ready_eval_dataloader_next_to_a_training_collate_fn() -> None:
    trainer = _trainer()
    original = trainer.calculate_train_batch_loss
    trainer.calculate_train_batch_loss = lambda batch: original(batch[:2])  # type: ignore[method-assign]
    trainer.train(
        _Indexed(),
        num_epochs=1,
        per_device_batch_size=8,
        collate_fn=_with_ids,
        eval_dataset=DataLoader(_data(), batch_size=5),
    )
    assert trainer.run_history.get_latest_metric("eval_loss_epoch") > 0


@pytest.mark.parametrize(
    ("extra", "named"),
    [({"batch_size": 16}, "batch_size=16"), ({"drop_last": True}, "drop_last=True")],
)
def test_batch_size_or_drop_last_next_to_a_batch_sampler_is_an_error(
    extra: dict[str, Any], named: str
) -> None:
    # the batch sampler's pairs were trained and the run recorded a batch size of 16
    trainer = _trainer()
    with pytest.raises(ValueError, match=rf"batch_sampler \(_Pairs\) and {named}.*Leave them out"):
        trainer.train(
            _data(), num_epochs=1, train_dataloader_kwargs={"batch_sampler": _Pairs(), **extra}
        )


def test_a_batch_sampler_with_false_drop_last_trains_its_batches() -> None:
    trainer = _trainer()
    trainer.train(
        _data(),
        num_epochs=1,
        train_dataloader_kwargs={"batch_sampler": _Pairs(), "drop_last": False},
    )
    assert trainer.state.global_step == N // 2


# ------------------------------------------ resuming with DataLoader worker processes
class _Stop(TrainerCallback):
    def __init__(self, at: int) -> None:
        self.at = at

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.global_step == self.at:
            raise StopTrainingError("cut")


def _end_workers() -> None:
    for worker in multiprocessing.active_children():
        worker.terminate()
        worker.join()


def _resume_warnings(tmp_path: Path, stop_at: int, **loader: Any) -> list[str]:
    """Warnings of a run resumed from a checkpoint taken after ``stop_at`` updates."""
    cut = _trainer()
    cut.callback_handler.add_callback(_Stop(stop_at))
    kwargs: dict[str, Any] = {"num_epochs": 2, "per_device_batch_size": 4}
    cut.train(_data(), train_dataloader_kwargs=loader, **kwargs)
    cut.save_checkpoint(tmp_path / "cut.pt")
    _end_workers()  # a cut run could leave them alive (see the stopped-run test below)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = _trainer()
        again.train(
            _data(), train_dataloader_kwargs=loader, resume_from=tmp_path / "cut.pt", **kwargs
        )
    assert again.state.global_step == 12
    return [str(w.message) for w in caught if "resumed" in str(w.message)]


def test_a_mid_epoch_resume_with_worker_processes_warns_that_their_draws_differ(
    tmp_path: Path,
) -> None:
    # docs/resume.md: draws in workers are not replayed after a mid-epoch resume; the
    # Trainer said nothing, and a run with random augmentations ended with other weights
    messages = _resume_warnings(tmp_path, 3, num_workers=2)
    assert len(messages) == 1
    assert "resumed 3 batch(es) into the epoch" in messages[0]
    assert "num_workers=2" in messages[0] and "num_workers=0" in messages[0]


@pytest.mark.parametrize(
    ("stop_at", "loader"),
    [(3, {}), (6, {"num_workers": 2})],
    ids=["mid-epoch, no workers", "epoch's end, workers"],
)
def test_a_resume_whose_workers_draw_as_before_does_not_warn(
    tmp_path: Path, stop_at: int, loader: dict[str, Any]
) -> None:
    assert _resume_warnings(tmp_path, stop_at, **loader) == []


def test_a_resume_after_the_first_epoch_with_persistent_workers_warns(tmp_path: Path) -> None:
    # the uninterrupted run's persistent workers go on drawing from epoch 1 into epoch 2
    messages = _resume_warnings(tmp_path, 6, num_workers=2, persistent_workers=True)
    assert len(messages) == 1
    assert "after the first epoch with persistent_workers=True" in messages[0]


def test_a_run_stopped_mid_epoch_leaves_no_worker_processes() -> None:
    trainer = _trainer()
    trainer.callback_handler.add_callback(_Stop(2))
    try:
        trainer.train(
            _data(),
            num_epochs=1,
            per_device_batch_size=4,
            train_dataloader_kwargs={"num_workers": 2},
        )
        assert trainer.state.global_step == 2
        assert multiprocessing.active_children() == []
    finally:
        _end_workers()
