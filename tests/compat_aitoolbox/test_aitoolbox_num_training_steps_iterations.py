"""get_num_training_steps() equals the optimizer updates a num_iterations run makes.

A run of ``num_iterations`` batches with gradient accumulation steps once per window and once
more for each epoch's (and the run's) last, shorter window; a scheduler sized from the count
must not run past its end.
"""

from __future__ import annotations

import pytest
import torch
from aitb_helpers import MyNeuralModel, dataset
from torch.utils.data import DataLoader

from scramjet.compat.aitoolbox import TrainLoop
from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import AbstractCallback


class _CountSteps(AbstractCallback):
    def __init__(self) -> None:
        super().__init__("count optimizer steps")
        self.steps = 0
        self.expected: list[int] = []

    def on_train_begin(self) -> None:
        self.expected.append(self.train_loop_obj.get_num_training_steps())

    def on_after_optimizer_step(self) -> None:
        self.steps += 1


@pytest.mark.parametrize(
    ("num_iterations", "grad_accumulation"), [(6, 2), (7, 2), (5, 3), (13, 4), (4, 1)]
)
def test_num_training_steps_matches_the_updates_made(
    num_iterations: int, grad_accumulation: int
) -> None:
    model = MyNeuralModel()
    loop = TrainLoop(
        model,
        DataLoader(dataset(40, 0), batch_size=8),  # 5 batches per epoch
        None,
        None,
        torch.optim.SGD(model.parameters(), lr=0.1),
        torch.nn.CrossEntropyLoss(),
    )
    counter = _CountSteps()
    loop.fit(
        num_iterations=num_iterations, grad_accumulation=grad_accumulation, callbacks=[counter]
    )
    assert counter.expected == [counter.steps]
    assert loop.get_num_training_steps() == counter.steps
