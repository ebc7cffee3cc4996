"""A checkpoint saved during or right after the epoch's evaluation resumes as if the run
had never stopped: the evaluation is not run (nor recorded) again, and the random number
generators go on from where the saved run left them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback


class SaveThenStop(TrainerCallback):
    """Saves a single-file checkpoint at ``event`` of epoch 2, then crashes the run."""

    def __init__(self, event: str, path: Path) -> None:
        self.event, self.path = event, path

    def _save(self, trainer: Trainer, event: str) -> None:
        if event != self.event or trainer.state.epoch != 1:
            return
        trainer.save_checkpoint(self.path)
        raise KeyboardInterrupt  # passes through callbacks unwrapped

    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self._save(trainer, "on_train_epoch_end")

    def on_eval_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self._save(trainer, "on_eval_epoch_end")

    def on_evaluation_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self._save(trainer, "on_evaluation_run_end")


class EvaluateByHand(TrainerCallback):
    """Evaluates other data in the middle of each epoch's end (as a user's metric does)."""

    def __init__(self, data: TensorDataset) -> None:
        self.data, self.evaluations = data, 0

    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        trainer.evaluate(self.data, per_device_batch_size=4)

    def on_eval_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.evaluations += 1


def _data(seed: int, n: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, generator=g)
    return TensorDataset(x, (x[:, 0] > 0).long())


def _run(callbacks: list[TrainerCallback], resume: Path | None = None) -> Trainer:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Dropout(0.3), nn.ReLU(), nn.Linear(16, 2))
    trainer = Trainer(
        model,
        loss_func=nn.CrossEntropyLoss(),
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=callbacks,
    )
    # eval_dataset shuffled by its loader: each evaluation draws from the RNG
    trainer.train(
        _data(1, 40),
        eval_dataset=_data(2, 24),
        num_epochs=3,
        per_device_batch_size=8,
        eval_dataloader_kwargs={"shuffle": True},
        resume_from=resume,
    )
    return trainer


def _same_run(got: Trainer, want: Trainer) -> None:
    for a, b in zip(got.model.parameters(), want.model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert got.run_history.state_dict() == want.run_history.state_dict()


@pytest.mark.parametrize("event", ["on_eval_epoch_end", "on_evaluation_run_end"])
def test_a_checkpoint_saved_after_the_epoch_evaluation_resumes_without_evaluating_again(
    tmp_path: Path, event: str, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = _run([])
    path = tmp_path / "state.pt"
    with pytest.raises(KeyboardInterrupt):
        _run([SaveThenStop(event, path)])
    capsys.readouterr()
    resumed = _run([], resume=path)
    assert "after the evaluation of epoch 2" in capsys.readouterr().out
    assert len(resumed.run_history.get_metric_values("eval_loss_epoch")) == 3
    _same_run(resumed, whole)


def test_an_evaluation_called_by_hand_at_the_epoch_end_leaves_the_epoch_evaluation_to_run(
    tmp_path: Path,
) -> None:
    extra = _data(3, 12)
    whole = _run([EvaluateByHand(extra)])
    path = tmp_path / "state.pt"
    with pytest.raises(KeyboardInterrupt):
        # saved after the hand-called evaluation, before the epoch's own
        _run([EvaluateByHand(extra), SaveThenStop("on_train_epoch_end", path)])
    by_hand = EvaluateByHand(extra)
    resumed = _run([by_hand], resume=path)
    # epoch 2's own evaluation, then epoch 3's by hand and its own
    assert by_hand.evaluations == 3
    _same_run(resumed, whole)
