"""A practitioner's own data code: DataLoaders, samplers, batch samplers and streams.

Each run feeds samples whose first feature is their index, so a callback can record which
samples every step trained on. A run that crashes mid-epoch and resumes from its last
checkpoint must see exactly the samples an uninterrupted run sees after that point, and
end with its weights.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    Sampler,
)

from scramjet import Trainer, seed_everything
from scramjet.callbacks import SaveTrainingStateCallback, TrainerCallback

N = 24  # samples; batches of 4: 6 steps per epoch


class Indexed(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Sample ``i`` is ``([i, 1], [i % 3])``; ``noisy`` adds a random draw (an augmentation)."""

    def __init__(self, n: int = N, noisy: bool = False) -> None:
        self.n, self.noisy = n, noisy

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.tensor([float(i), 1.0])
        if self.noisy:
            x = x + 0.01 * torch.rand(2)
        return x, torch.tensor([float(i % 3)])


class Stream(IterableDataset[tuple[torch.Tensor, torch.Tensor]]):
    """The samples of :class:`Indexed` in order; ``claimed`` is what ``__len__`` says."""

    def __init__(self, n: int = N, noisy: bool = False, claimed: int | None = None) -> None:
        self.items, self.claimed = Indexed(n, noisy), claimed

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return (self.items[i] for i in range(len(self.items)))

    def __len__(self) -> int:
        return self.claimed if self.claimed is not None else len(self.items)


class GlobalRandomSampler(Sampler[int]):
    """A user's shuffling sampler that draws from torch's global generator."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Iterator[int]:
        return iter(torch.randperm(self.n).tolist())

    def __len__(self) -> int:
        return self.n


class PythonRandomBuckets:
    """A bucketing batch sampler as often written: Python's ``random.shuffle``."""

    def __init__(self, n: int = N, size: int = 4) -> None:
        self.n, self.size = n, size

    def __iter__(self) -> Iterator[list[int]]:
        order = list(range(self.n))
        random.shuffle(order)
        batches = [order[i : i + self.size] for i in range(0, self.n, self.size)]
        random.shuffle(batches)
        return iter(batches)

    def __len__(self) -> int:
        return -(-self.n // self.size)


class Record(TrainerCallback):
    """The sample indices of every training step."""

    def __init__(self) -> None:
        self.steps: list[list[int]] = []

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.steps.append([int(v) for v in kwargs["batch"][0][:, 0].round().tolist()])


class CrashAt(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.global_step == self.step:
            raise RuntimeError("crash")


def _run(
    data: Callable[[], Any],
    *,
    epochs: int = 2,
    folder: Path | None = None,
    crash: int | None = None,
    resume: Path | None = None,
    **train_kwargs: Any,
) -> tuple[Trainer, Record]:
    seed_everything(0)
    model = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1))
    record = Record()
    callbacks: list[TrainerCallback] = [record]
    if folder is not None:
        callbacks.append(SaveTrainingStateCallback(folder, every_n_steps=1, keep_last=2))
    if crash is not None:
        callbacks.append(CrashAt(crash))
    trainer = Trainer(
        model, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=1e-3), callbacks, seed=0
    )
    kwargs = {"per_device_batch_size": 4, **train_kwargs}
    try:
        trainer.train(data(), num_epochs=epochs, resume_from=resume, **kwargs)
    except RuntimeError as error:
        if "crash" not in str(error):
            raise
    return trainer, record


def _crash_and_resume(
    data: Callable[[], Any], tmp_path: Path, crash: int, **kwargs: Any
) -> tuple[list[list[int]], list[list[int]], bool]:
    """(steps of an uninterrupted run, steps of the crashed run up to its last checkpoint
    followed by those of its resumption, whether the final weights are equal)."""
    whole, whole_record = _run(data, **kwargs)
    _, crashed = _run(data, folder=tmp_path, crash=crash, **kwargs)
    resumed, resumed_record = _run(data, resume=tmp_path, **kwargs)
    saved = crash - 1  # the checkpoint of the crashing step is never written
    joined = crashed.steps[:saved] + resumed_record.steps
    same = all(
        torch.equal(a, b)
        for a, b in zip(
            whole.unwrapped_model.state_dict().values(),
            resumed.unwrapped_model.state_dict().values(),
            strict=True,
        )
    )
    return whole_record.steps, joined, same


@pytest.mark.parametrize("crash", [3, 9])
def test_a_ready_dataloader_with_a_random_batch_sampler_resumes_exactly(
    crash: int, tmp_path: Path
) -> None:
    def data() -> DataLoader[Any]:
        return DataLoader(Indexed(), batch_sampler=BatchSampler(RandomSampler(range(N)), 4, False))

    whole, joined, same_weights = _crash_and_resume(data, tmp_path, crash)
    assert sorted(i for step in whole[:6] for i in step) == list(range(N))  # epoch 1: all once
    assert joined == whole
    assert same_weights


@pytest.mark.parametrize("kind", ["ready DataLoader", "IterableDataset"])
def test_reading_past_consumed_batches_leaves_the_random_generators_as_saved(
    kind: str, tmp_path: Path
) -> None:
    # A resume reads past the consumed batches of a loader it cannot skip by index; an
    # augmentation in the dataset must not draw for them, or every later sample differs.
    def data() -> Any:
        if kind == "IterableDataset":
            return Stream(noisy=True)
        return DataLoader(Indexed(noisy=True), batch_size=4, shuffle=True)

    whole, joined, same_weights = _crash_and_resume(data, tmp_path, crash=9)
    assert joined == whole
    assert same_weights


def test_a_loader_that_yields_fewer_batches_than_its_length_warns(tmp_path: Path) -> None:
    # len() says 12 batches, the stream holds 6: max_num_train_steps=12 would end after 6
    # updates without a word.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer, _ = _run(lambda: Stream(claimed=48), epochs=1, max_num_train_steps=12)
    assert trainer.state.global_step == 6
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any("fewer batches than its length" in m and "12" in m for m in messages), messages


@pytest.mark.parametrize("where", ["sampler", "batch_sampler"])
def test_a_sampler_that_shuffles_with_the_global_generators_resumes_exactly(
    where: str, tmp_path: Path
) -> None:
    # train_dataloader_kwargs={"sampler": ...} or {"batch_sampler": ...} of a user that
    # shuffles with torch.randperm or random.shuffle, as most hand-written samplers do
    sampler: Any = GlobalRandomSampler(N) if where == "sampler" else PythonRandomBuckets()
    kwargs = {"train_dataloader_kwargs": {where: sampler}}
    whole, joined, same_weights = _crash_and_resume(Indexed, tmp_path, crash=9, **kwargs)
    epochs = [sorted(i for step in whole[k : k + 6] for i in step) for k in (0, 6)]
    assert epochs == [list(range(N))] * 2
    assert whole[:6] != whole[6:]  # reshuffled every epoch
    assert joined == whole
    assert same_weights


class ShuffledStream(IterableDataset[tuple[torch.Tensor, torch.Tensor]]):
    """A stream that shuffles its samples with ``random.shuffle`` when it starts."""

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        order = list(range(N))
        random.shuffle(order)
        return (Indexed()[i] for i in order)

    def __len__(self) -> int:
        return N


@pytest.mark.parametrize("kind", ["sampler", "batch_sampler", "shuffled stream"])
def test_a_ready_loader_that_shuffles_with_the_global_generators_resumes_exactly(
    kind: str, tmp_path: Path
) -> None:
    def data() -> Any:
        if kind == "sampler":
            return DataLoader(Indexed(noisy=True), batch_size=4, sampler=GlobalRandomSampler(N))
        if kind == "batch_sampler":
            return DataLoader(Indexed(noisy=True), batch_sampler=PythonRandomBuckets())
        return ShuffledStream()

    whole, joined, same_weights = _crash_and_resume(data, tmp_path, crash=9)
    epochs = [sorted(i for step in whole[k : k + 6] for i in step) for k in (0, 6)]
    assert epochs == [list(range(N))] * 2
    assert whole[:6] != whole[6:]  # reshuffled every epoch
    assert joined == whole
    assert same_weights


def _plain_trainer(model: nn.Module | None = None) -> Trainer:
    seed_everything(0)
    model = model or nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1))
    return Trainer(model, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=1e-3), [], seed=0)


def test_a_ready_loader_whose_drop_last_leaves_no_batch_is_named_as_such() -> None:
    loader = DataLoader(Indexed(3), batch_size=4, drop_last=True)
    with pytest.raises(ValueError, match="drop_last") as caught:
        _plain_trainer().train(loader, num_epochs=1)
    assert "3 sample" in str(caught.value)


def test_a_last_batch_of_one_sample_with_batchnorm_names_drop_last() -> None:
    model = nn.Sequential(nn.Linear(2, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
    with pytest.raises(ValueError, match="drop_last"):
        _plain_trainer(model).train(Indexed(9), num_epochs=1, per_device_batch_size=4)


class FixedBuckets:
    """A batch sampler that groups indices out of dataset order (bucketing by length)."""

    def __iter__(self) -> Iterator[list[int]]:
        return iter([[9, 1, 5], [0, 2], [3, 4, 6, 7, 8]])

    def __len__(self) -> int:
        return 3


@pytest.mark.parametrize("kind", ["batch_sampler", "shuffled DataLoader"])
def test_predict_returns_dataset_order_or_says_it_cannot(kind: str) -> None:
    trainer = _plain_trainer()
    data = Indexed(10)
    with torch.no_grad():
        expected = trainer.model(torch.stack([data[i][0] for i in range(10)]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if kind == "batch_sampler":
            out = trainer.predict(data, dataloader_kwargs={"batch_sampler": FixedBuckets()})
        else:
            out = trainer.predict(DataLoader(data, batch_size=3, shuffle=True))
    warned = any("order" in str(w.message) for w in caught)
    if kind == "batch_sampler":  # the order it read is known: undone, without a word
        assert torch.allclose(out, expected) and not warned
    else:  # a ready loader's shuffle cannot be undone from outside: said so
        assert warned and not torch.allclose(out, expected)


def test_predict_and_evaluate_on_an_empty_dataset_say_so_without_speaking_of_training() -> None:
    trainer = _plain_trainer()
    for run in (trainer.predict, trainer.evaluate):
        with pytest.raises(ValueError, match=r"is empty \(len\(\) == 0\)") as caught:
            run([])
        assert "before training" not in str(caught.value)
