"""A run that ``trainer.stop_training()`` ended between two saves of
``SaveTrainingStateCallback`` (no save due at the step it stopped at): its checkpoint
folder ends with the stop, so the same command run again with ``resume_from="auto"``
neither trains the steps after the last save again nor trains on past the stop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer
from scramjet.callbacks import SaveTrainingStateCallback, TrainerCallback

STOP_AT = 6  # 4 updates per epoch; saves every 4 updates


class StopWhenFlagged(TrainerCallback):
    """Stops at STOP_AT when a flag file exists (a user's "stop now" request), once."""

    def __init__(self, flag: Path) -> None:
        self.flag = flag

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.global_step == STOP_AT and self.flag.exists():
            self.flag.unlink()
            trainer.stop_training()


def run(ckpt: Path, flag: Path) -> Trainer:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(16, 4, generator=g), torch.randint(0, 2, (16,), generator=g))
    saver = SaveTrainingStateCallback(ckpt, every_n_steps=4, every_n_epochs=None)
    trainer = Trainer(
        model,
        nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[saver, StopWhenFlagged(flag)],
        seed=0,
    )
    trainer.train(data, num_epochs=8, per_device_batch_size=4, resume_from="auto")
    return trainer


def test_a_stop_between_saves_is_kept_by_an_auto_rerun(tmp_path: Path) -> None:
    flag = tmp_path / "stop"
    flag.touch()
    first = run(tmp_path / "ckpt", flag)
    assert first.state.global_step == STOP_AT
    weights = {k: v.clone() for k, v in first.model.state_dict().items()}
    files = sorted(p.name for p in (tmp_path / "ckpt").glob("*.pt"))
    assert files[-1].endswith(f"step{STOP_AT}.pt"), files  # one save more, at the stop

    rerun = run(tmp_path / "ckpt", flag)

    assert rerun.state.global_step == STOP_AT, "the rerun trained on past the stop"
    assert rerun.stop_reason is not None and "stop_training" in str(rerun.stop_reason)
    for name, value in rerun.model.state_dict().items():
        assert torch.equal(value, weights[name]), name
    assert sorted(p.name for p in (tmp_path / "ckpt").glob("*.pt")) == files  # none added
