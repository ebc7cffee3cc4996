"""A TrainLoop trains and evaluates what the user's DataLoaders hold, counted in samples.

Before: a time-major batch (``[T, B, F]``, nn.LSTM's layout) was counted as T samples, so
every epoch loss was weighted by sequence length; a loader whose sampler draws its own
epoch (``RandomSampler(num_samples=4)``, a sampler subclass) was rebuilt as a plain
shuffle of the whole dataset; the training-set loss ignored ``drop_last``; and a
validation loader's own ``collate_fn`` was replaced by the training loader's.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler, TensorDataset

from scramjet.compat.aitoolbox.torchtrain.model import TTModel
from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoop

# lr=0 keeps every batch loss fixed, so the recorded means can be checked exactly
pytestmark = pytest.mark.filterwarnings("ignore:Every parameter group's learning rate is still 0")


class Seq(TTModel):
    """Time-major inputs [T, B, F], targets [B, 1]."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.mean(0))

    def get_loss(self, batch, criterion, device):
        x, y = batch
        return criterion(self(x), y)

    def get_predictions(self, batch, device):
        x, y = batch
        return self(x), y, None


def test_time_major_batches_are_weighted_by_their_samples_not_their_length() -> None:
    torch.manual_seed(0)
    batches = [(torch.randn(t, b, 3), torch.randn(b, 1)) for t, b in [(2, 4), (10, 4), (3, 2)]]
    model = Seq()
    loop = TrainLoop(model, batches, batches, None, torch.optim.SGD(model.parameters(), lr=0.0),
                     nn.MSELoss())  # fmt: skip
    loop.fit(num_epochs=1)
    with torch.no_grad():
        losses = [nn.MSELoss()(model(x), y).item() for x, y in batches]
    per_sample = sum(loss * len(y) for loss, (_, y) in zip(losses, batches, strict=True)) / 10
    for name in ("accumulated_loss", "loss", "val_loss"):
        assert abs(loop.train_history[name][0] - per_sample) < 1e-6, (
            name,
            loop.train_history[name],
        )


class Recording(TTModel):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(1, 1)
        self.trained: list[float] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)

    def get_loss(self, batch, criterion, device):
        x, y = batch
        if self.training:
            self.trained += x[:, 0].tolist()
        return criterion(self(x), y)

    def get_predictions(self, batch, device):
        x, y = batch
        return self(x), y, None


class Reversed(SequentialSampler):
    def __iter__(self):
        return iter(range(len(self.data_source) - 1, -1, -1))


def _data(n: int = 12) -> TensorDataset:
    x = torch.arange(n, dtype=torch.float32).unsqueeze(1)
    return TensorDataset(x, 2 * x)


def _fit(loader: DataLoader, **kwargs) -> Recording:
    torch.manual_seed(0)
    model = Recording()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    TrainLoop(model, loader, None, None, opt, nn.MSELoss(), end_auto_eval=False).fit(**kwargs)
    return model


def test_a_sampler_that_draws_its_own_epoch_is_followed() -> None:
    data = _data()
    drawn = _fit(DataLoader(data, batch_size=2, sampler=RandomSampler(data, replacement=True,
                                                                        num_samples=4)),
                 num_epochs=2)  # fmt: skip
    assert len(drawn.trained) == 8  # 4 samples per epoch, as the loader gives them
    backwards = _fit(DataLoader(data, batch_size=4, sampler=Reversed(data)), num_epochs=1)
    assert backwards.trained == [float(i) for i in range(11, -1, -1)]


def test_training_set_loss_drops_what_training_drops() -> None:
    data = _data(10)
    torch.manual_seed(0)
    model = Recording()
    loop = TrainLoop(model, DataLoader(data, batch_size=4, drop_last=True), None, None,
                     torch.optim.SGD(model.parameters(), lr=0.0), nn.MSELoss())  # fmt: skip
    loop.fit(num_epochs=1)
    with torch.no_grad():
        x, y = data[:8]
        expected = nn.MSELoss()(model(x), y).item()
    assert abs(loop.train_history["loss"][0] - expected) < 1e-6 * expected


def test_a_validation_loaders_own_collate_batches_its_evaluations() -> None:
    def shifted(samples):  # the training collate: targets off by 100
        x = torch.stack([s[0] for s in samples])
        return x, torch.stack([s[1] for s in samples]) + 100

    def plain(samples):
        return torch.stack([s[0] for s in samples]), torch.stack([s[1] for s in samples])

    data = _data(8)
    torch.manual_seed(0)
    model = Recording()
    loop = TrainLoop(model, DataLoader(data, batch_size=4, collate_fn=shifted),
                     DataLoader(data, batch_size=4, collate_fn=plain), None,
                     torch.optim.SGD(model.parameters(), lr=0.0), nn.MSELoss())  # fmt: skip
    loop.fit(num_epochs=1)
    with torch.no_grad():
        x, y = data[:]
        expected = nn.MSELoss()(model(x), y).item()
    assert abs(loop.train_history["val_loss"][0] - expected) < 1e-5, loop.train_history["val_loss"]
    _, truth, _ = loop.predict_on_validation_set()
    assert torch.equal(torch.as_tensor(truth).flatten(), y.flatten())


class StepCounter:
    """An optimizer-like object without parameter groups (AIToolbox accepts any
    object with step and zero_grad)."""

    def __init__(self) -> None:
        self.steps = 0

    def zero_grad(self) -> None:
        pass

    def step(self) -> None:
        self.steps += 1


def test_an_optimizer_without_parameter_groups_trains_twice() -> None:
    # The groups' rates are read at the end of each run: a group without "lr" raised KeyError.
    model, optimizer = Recording(), StepCounter()
    loop = TrainLoop(model, DataLoader(_data(8), batch_size=4), None, None, optimizer,
                     nn.MSELoss(), end_auto_eval=False)  # fmt: skip
    loop.fit(num_epochs=1)
    loop.fit(num_epochs=2)  # AIToolbox's range(epoch, num_epochs): epochs 0 and 1 again
    assert optimizer.steps == 2 + 4
