"""The compat Trainer's checkpoint files: the peer's keys, and exact resume through them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import TensorDataset

from scramjet.compat.pytorch_accelerated import Trainer
from scramjet.compat.pytorch_accelerated.callbacks import (
    SaveTrainingStateCallback,
    TrainerCallback,
    WSDCheckpointCallback,
)
from scramjet.compat.pytorch_accelerated.schedulers import CosineLrScheduler, WSDLrScheduler


def _data() -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(48, 6, generator=g)
    return TensorDataset(x, (x.sum(1) > 0).long())


def _trainer(callbacks: tuple[Any, ...] = ()) -> Trainer:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return Trainer(model, torch.nn.CrossEntropyLoss(), opt, callbacks=callbacks, seed=0)


class SaveAfterEpoch(TrainerCallback):
    def __init__(self, path: Path, epoch: int) -> None:
        self.path, self.epoch = path, epoch

    def on_training_run_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.run_history.current_epoch == self.epoch:
            trainer.save_checkpoint(self.path, checkpoint_kwargs={"note": "mid-run", "step": 7})


def _train(trainer: Trainer, **kwargs: Any) -> None:
    fn = CosineLrScheduler.create_scheduler_fn(num_warmup_epochs=1, lr_min=1e-3)
    trainer.train(_data(), num_epochs=3, per_device_batch_size=8, create_scheduler_fn=fn, **kwargs)


def test_file_has_the_peers_top_level_keys(tmp_path: Path) -> None:
    trainer = _trainer((SaveAfterEpoch(tmp_path / "ckpt.pt", 2),))
    _train(trainer)
    raw = torch.load(tmp_path / "ckpt.pt", map_location="cpu", weights_only=True)
    assert {"model_state_dict", "optimizer_state_dict", "scheduler_state_dict", "note"} <= set(raw)
    assert raw["scheduler_state_dict"]["num_updates"] == 2 * 6 - 1
    assert raw["model_state_dict"].keys() == trainer.model.state_dict().keys()
    # A kwarg named like scramjet's own payload field is returned by load_checkpoint.
    loaded = trainer.load_checkpoint(tmp_path / "ckpt.pt")
    assert loaded["note"] == "mid-run" and loaded["step"] == 7


def test_resume_from_a_save_checkpoint_file_is_exact(tmp_path: Path) -> None:
    whole = _trainer()
    _train(whole)
    first = _trainer((SaveAfterEpoch(tmp_path / "ckpt.pt", 1),))
    _train(first)
    resumed = _trainer()
    _train(resumed, resume_from=tmp_path / "ckpt.pt")
    for a, b in zip(whole.model.parameters(), resumed.model.parameters()):
        assert torch.equal(a, b)
    assert resumed.run_history.get_metric_values("train_loss_epoch") == (
        whole.run_history.get_metric_values("train_loss_epoch")
    )


def test_load_checkpoint_reads_a_plain_peer_file(tmp_path: Path) -> None:
    trainer = _trainer()
    state = {k: torch.full_like(v, 0.5) for k, v in trainer.model.state_dict().items()}
    torch.save({"model_state_dict": state, "epoch": 4}, tmp_path / "peer.pt")
    loaded = trainer.load_checkpoint(tmp_path / "peer.pt", load_optimizer=False)
    assert loaded["epoch"] == 4
    assert all(bool((p == 0.5).all()) for p in trainer.model.parameters())


def test_training_state_directories_resume_exactly(tmp_path: Path) -> None:
    whole = _trainer()
    _train(whole)
    saver = SaveTrainingStateCallback(tmp_path, save_every_n_epochs=1, max_checkpoints=2)
    _train(_trainer((saver,)))
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert kept == ["checkpoint_epoch_3", "checkpoint_final"]
    resumed = _trainer()
    _train(resumed, resume_from=tmp_path / "checkpoint_epoch_3")
    for a, b in zip(whole.model.parameters(), resumed.model.parameters()):
        assert torch.equal(a, b)


def test_wsd_checkpoints_before_and_after_each_decay(tmp_path: Path) -> None:
    trainer = _trainer((WSDCheckpointCallback(tmp_path),))
    fn = WSDLrScheduler.create_scheduler_fn(num_checkpoints=2, decay_phase_ratio=0.25)
    trainer.train(_data(), num_epochs=4, per_device_batch_size=8, create_scheduler_fn=fn)
    # 24 updates: periods [0, 12) and [12, 24), each decaying over its last quarter.
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "checkpoint_12_wsd_post_decay.pt",
        "checkpoint_21_wsd_pre_decay",
        "checkpoint_24_wsd_post_decay.pt",
        "checkpoint_9_wsd_pre_decay",
    ]
    restored = _trainer()
    meta = restored.load_training_state(tmp_path / "checkpoint_21_wsd_pre_decay")
    assert meta["step"] == 21 and meta["checkpoint_type"] == "wsd_pre_decay"
    assert restored.state.global_step == 21


def test_wsd_callback_needs_a_wsd_scheduler(tmp_path: Path) -> None:
    trainer = _trainer((WSDCheckpointCallback(tmp_path),))
    with pytest.raises(Exception, match="WSDLrScheduler"):
        trainer.train(_data(), num_epochs=1, per_device_batch_size=8)


def test_an_evaluation_only_trainer_takes_optimizer_none(tmp_path: Path) -> None:
    """As in pytorch-accelerated: Trainer(model, loss, optimizer=None) loads weights with
    load_optimizer=False and evaluates; training and loading an optimizer are refused."""
    trained = _trainer()
    trained.train(_data(), num_epochs=1, per_device_batch_size=16)
    trained.save_checkpoint(tmp_path / "c.pt")
    trained.evaluate(_data(), per_device_batch_size=16)
    expected = trained.run_history.get_latest_metric("eval_loss_epoch")

    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    evaluator = Trainer(model, torch.nn.CrossEntropyLoss(), optimizer=None)
    with pytest.raises(ValueError, match=r"optimizer=None.*Pass load_optimizer=False"):
        evaluator.load_checkpoint(tmp_path / "c.pt")
    evaluator.load_checkpoint(tmp_path / "c.pt", load_optimizer=False)
    evaluator.evaluate(_data(), per_device_batch_size=16)
    assert evaluator.run_history.get_latest_metric("eval_loss_epoch") == pytest.approx(expected)
    with pytest.raises(TypeError, match=r"train\(\) needs an optimizer.*optimizer=None"):
        evaluator.train(_data(), num_epochs=1)
    evaluator.save_checkpoint(tmp_path / "e.pt")  # weights only: no optimizer to save
    assert "optimizer_state_dict" not in torch.load(tmp_path / "e.pt", weights_only=True)
