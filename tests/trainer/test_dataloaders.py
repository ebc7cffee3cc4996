"""DataLoader settings: collate functions, user generators and samplers, batches as dicts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from tests.common.world import TinyMLP, blobs, make_trainer
from torch.utils.data import Dataset, Sampler, SequentialSampler, default_collate

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback


class Counting:
    """A collate function that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, samples: list[Any]) -> Any:
        self.calls += 1
        return default_collate(samples)


@pytest.mark.parametrize("where", ["argument", "dataloader_kwargs"])
def test_collate_fn_from_argument_or_kwargs(where: str) -> None:
    train_collate, eval_collate = Counting(), Counting()
    trainer = make_trainer(TinyMLP())
    if where == "argument":
        trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=4, collate_fn=train_collate)
        trainer.evaluate(blobs(n=8), per_device_batch_size=4, collate_fn=eval_collate)
    else:
        trainer.train(
            blobs(n=8),
            num_epochs=1,
            per_device_batch_size=4,
            train_dataloader_kwargs={"collate_fn": train_collate},
            eval_dataset=blobs(n=8),
            eval_dataloader_kwargs={"collate_fn": eval_collate},
        )
    assert train_collate.calls == 2 and eval_collate.calls == 2


def test_a_batch_size_in_the_dataloader_kwargs_takes_precedence_and_is_recorded() -> None:
    """As in pytorch-accelerated: ``train_dataloader_kwargs={"batch_size": 6}`` builds
    batches of 6 whatever ``per_device_batch_size`` says, and the run records 6."""
    train_collate, eval_collate = Counting(), Counting()
    trainer = make_trainer(TinyMLP())
    trainer.train(
        blobs(n=24),
        num_epochs=1,
        per_device_batch_size=4,
        train_dataloader_kwargs={"batch_size": 6, "collate_fn": train_collate},
        eval_dataset=blobs(n=24),
        eval_dataloader_kwargs={"batch_size": 12, "collate_fn": eval_collate},
    )
    assert train_collate.calls == 4 and trainer.state.global_step == 4
    assert eval_collate.calls == 2
    config = trainer.run_config
    assert (config.train_per_device_batch_size, config.eval_per_device_batch_size) == (6, 12)
    evaluate_collate = Counting()
    trainer.evaluate(
        blobs(n=24), dataloader_kwargs={"batch_size": 8, "collate_fn": evaluate_collate}
    )
    assert evaluate_collate.calls == 3


@pytest.mark.parametrize("bad", [0, -2, 2.5, True])
def test_a_bad_batch_size_in_the_dataloader_kwargs_is_named(bad: Any) -> None:
    trainer = make_trainer(TinyMLP())
    with pytest.raises(
        ValueError, match=r"train_dataloader_kwargs\['batch_size'\] must be a positive"
    ):
        trainer.train(blobs(n=8), num_epochs=1, train_dataloader_kwargs={"batch_size": bad})


def test_user_generator_and_sampler_are_accepted() -> None:
    trainer = make_trainer(TinyMLP(), seed=0)
    data = blobs(n=12)
    trainer.train(
        data,
        num_epochs=2,
        per_device_batch_size=4,
        train_dataloader_kwargs={
            "generator": torch.Generator(),
            "sampler": SequentialSampler(data),
        },
    )
    assert trainer.state.global_step == 6


class DictData(Dataset[dict[str, torch.Tensor]]):
    def __init__(self) -> None:
        self.x, self.y = blobs(n=12).tensors

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"features": self.x[i], "label": self.y[i]}


class DictTrainer(Trainer):
    """Batches are dicts: override the two loss hooks, as the README suggests."""

    def calculate_train_batch_loss(self, batch: Any) -> dict[str, Any]:
        out = self.model(batch["features"])
        loss = self.loss_func(out, batch["label"])  # type: ignore[misc]
        return {"loss": loss, "model_outputs": out, "batch_size": len(batch["label"])}

    calculate_eval_batch_loss = calculate_train_batch_loss

    def predict_step(self, batch: Any) -> Any:
        return self.model(batch["features"])


def test_dict_batches_through_overridden_hooks() -> None:
    trainer = make_trainer(TinyMLP(), trainer_cls=DictTrainer)
    trainer.train(DictData(), num_epochs=2, per_device_batch_size=5, eval_dataset=DictData())
    assert len(trainer.run_history.get_metric_values("eval_loss_epoch")) == 2
    assert trainer.predict(DictData(), per_device_batch_size=5).shape == (12, 3)


class EpochAware(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Records the epochs ``set_epoch`` was called with, and which epoch each sample saw."""

    def __init__(self) -> None:
        self.data = blobs(n=8)
        self.epoch = -1
        self.calls: list[int] = []
        self.seen: list[int] = []

    def set_epoch(self, epoch: int) -> None:
        self.calls.append(epoch)
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        self.seen.append(self.epoch)
        return self.data[i]


def test_train_dataset_set_epoch_is_called_every_epoch() -> None:
    data = EpochAware()
    make_trainer(TinyMLP()).train(data, num_epochs=3, per_device_batch_size=4)
    assert data.calls == [0, 1, 2]
    assert data.seen == [0] * 8 + [1] * 8 + [2] * 8, "set before the epoch's first sample"


class Buckets(Sampler[list[int]]):
    """A batch sampler of uneven batches whose order ``set_epoch`` changes."""

    def __init__(self, batches: list[list[int]], length: bool = True) -> None:
        self.batches, self.epochs, self.length = batches, [], length

    def set_epoch(self, epoch: int) -> None:
        self.epochs.append(epoch)

    def __iter__(self) -> Iterator[list[int]]:
        epoch = self.epochs[-1] if self.epochs else 0
        return iter(self.batches[::-1] if epoch % 2 else self.batches)

    def __len__(self) -> int:
        if not self.length:
            raise TypeError("no length")
        return len(self.batches)


class SeenBatches(TrainerCallback):
    def __init__(self) -> None:
        self.sizes: list[int] = []

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.sizes.append(len(kwargs["batch"][1]))

    def on_eval_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.sizes.append(-len(kwargs["batch"][1]))


@pytest.mark.parametrize("length", [True, False])
def test_a_batch_sampler_in_the_dataloader_kwargs_makes_the_batches(length: bool) -> None:
    """``batch_sampler=`` (e.g. length bucketing) sets every batch, for training and for
    evaluation; ``set_epoch`` reaches it every epoch. It was refused by the DataLoader
    ("mutually exclusive with batch_size, shuffle, sampler, and drop_last"), settings the
    user never passed."""
    seen = SeenBatches()
    trainer = make_trainer(TinyMLP(), callbacks=[seen], seed=0)
    data = blobs(n=10)
    train_batches = Buckets([[0, 1, 2], [3, 4, 5, 6, 7, 8, 9]], length=length)
    eval_batches = Buckets([[9], [0, 1, 2, 3, 4, 5, 6, 7, 8]])
    trainer.train(
        data,
        num_epochs=2,
        per_device_batch_size=4,
        train_dataloader_kwargs={"batch_sampler": train_batches},
        eval_dataset=data,
        eval_dataloader_kwargs={"batch_sampler": eval_batches},
    )
    assert seen.sizes == [3, 7, -1, -9, 7, 3, -1, -9]
    assert train_batches.epochs == [0, 1] and trainer.state.global_step == 4
    x, y = data.tensors
    expected = torch.nn.functional.cross_entropy(trainer.model(x), y).item()
    assert trainer.run_history.get_latest_metric("eval_loss_epoch") == pytest.approx(expected)
    with pytest.raises(ValueError, match="both a batch_sampler and a sampler"):
        trainer.train(
            data,
            num_epochs=1,
            train_dataloader_kwargs={"batch_sampler": train_batches, "sampler": [0, 1]},
        )
