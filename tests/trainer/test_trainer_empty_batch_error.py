"""A batch of 0 samples (a collate_fn that filtered every sample out, a loader of one's own
that slices past the end) has a NaN mean loss: the error names the empty batch, not the
learning rate, and evaluation does not report a NaN loss."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch import nn

from scramjet import Trainer


class _Batches:
    """Three (inputs, targets) batches; the one at ``empty`` holds no sample."""

    def __init__(self, empty: int) -> None:
        gen = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(8, 4, generator=gen), torch.randint(0, 3, (8,), generator=gen)
        self.empty = empty

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        cuts = [(0, 4), (4, 8), (4, 8)]
        cuts[self.empty] = (8, 8)
        for start, stop in cuts:
            yield self.x[start:stop], self.y[start:stop]

    def __len__(self) -> int:
        return 3


def _trainer(**kwargs: Any) -> Trainer:
    model = nn.Linear(4, 3)
    return Trainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), **kwargs
    )


@pytest.mark.parametrize("empty", [0, 1])
def test_an_empty_training_batch_is_named_as_such(empty: int) -> None:
    with pytest.raises(ValueError, match=rf"batch {empty + 1} of epoch 1 holds 0 samples") as info:
        _trainer().train(_Batches(empty), num_epochs=1)
    assert "learning rate" not in str(info.value)


def test_an_empty_training_batch_is_named_without_the_nan_guard_too() -> None:
    with pytest.raises(ValueError, match=r"batch 2 of epoch 1 holds 0 samples"):
        _trainer(callbacks=[]).train(_Batches(1), num_epochs=1)


def test_an_empty_evaluation_batch_is_an_error_not_a_nan_loss() -> None:
    with pytest.raises(ValueError, match=r"batch 2 of the evaluation holds 0 samples"):
        _trainer(callbacks=[]).evaluate(_Batches(1))


def test_an_empty_batch_whose_own_hook_gives_a_finite_loss_is_left_alone() -> None:
    class ZeroForEmpty(Trainer):
        def calculate_train_batch_loss(self, batch: Any) -> dict[str, Any]:
            out = super().calculate_train_batch_loss(batch)
            if out["batch_size"] == 0:
                out["loss"] = self.model(batch[0]).sum()  # 0.0 over no sample
            return out

    model = nn.Linear(4, 3)
    trainer = ZeroForEmpty(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[]
    )
    trainer.train(_Batches(1), num_epochs=1)
    assert trainer.state.global_step == 3
