"""Behaviour of the model callbacks: device moves, best-model saving, EMA, SyncBN, checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from tests.common.world import (
    StepRecorder,
    TinyMLP,
    assert_same_weights,
    blobs,
    clone,
    dataset_loss,
    make_trainer,
)
from torch import nn

from scramjet import Trainer
from scramjet.callbacks import (
    ConvertSyncBatchNormCallback,
    ModelEmaCallback,
    MoveModulesToDeviceCallback,
    SaveBestModelCallback,
    SaveTrainingStateCallback,
    TrainerCallback,
)


class Probe(nn.Module):
    """A module that remembers where it was asked to move."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(1))
        self.moves: list[Any] = []

    def to(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        self.moves.append(args[0] if args else kwargs.get("device"))
        return super().to(*args, **kwargs)


class WithExtraModule(Trainer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.extra = Probe()


def test_move_modules_to_device_moves_extra_modules() -> None:
    trainer = make_trainer(
        TinyMLP(), callbacks=[MoveModulesToDeviceCallback()], trainer_cls=WithExtraModule
    )
    extra = trainer.extra
    assert isinstance(extra, Probe) and extra.moves == []
    trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=4)
    assert extra.moves == [trainer.device]
    trainer.evaluate(blobs(n=8))
    assert extra.moves == [trainer.device] * 2
    assert make_trainer(TinyMLP(), trainer_cls=WithExtraModule).extra.moves == []


class Scripted(Trainer):
    """Records a scripted ``score`` (lower is better) at each epoch end."""

    scores = (0.5, 0.2, 0.7)

    def train_epoch_end(self) -> None:
        super().train_epoch_end()
        epoch = len(self.run_history.get_metric_values("score"))
        self.run_history.update_metric("score", self.scores[epoch])


class Snapshots(TrainerCallback):
    def __init__(self) -> None:
        self.weights: list[dict[str, torch.Tensor]] = []

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.weights.append({k: v.clone() for k, v in trainer.model.state_dict().items()})


@pytest.mark.parametrize("reload", [True, False])
def test_save_best_model_writes_and_reloads_the_best(tmp_path: Path, reload: bool) -> None:
    path = tmp_path / "best.pt"
    snaps = Snapshots()
    best = SaveBestModelCallback(path, watch_metric="score", load_saved_checkpoint=reload)
    model = TinyMLP()
    trainer = make_trainer(model, callbacks=[snaps, best], trainer_cls=Scripted)
    trainer.train(blobs(n=16), num_epochs=3, per_device_batch_size=4)
    assert path.is_file() and best.best == 0.2
    final = snaps.weights[1] if reload else snaps.weights[2]
    for k, v in model.state_dict().items():
        assert torch.equal(v, final[k]), k
    # Reloading brings back the weights only: the run's history and counters stay whole.
    assert trainer.run_history.get_metric_values("score") == [0.5, 0.2, 0.7]
    assert trainer.state.epoch == 3 and trainer.state.global_step == 12
    assert best.best == 0.2
    # The file holds epoch 2's weights and the metric, readable by a fresh trainer.
    other = TinyMLP(seed=5)
    values = make_trainer(other).load_checkpoint(path, load_optimizer=False)
    assert values["score"] == pytest.approx(0.2)
    for k, v in other.state_dict().items():
        assert torch.equal(v, snaps.weights[1][k]), k


def test_model_ema_matches_hand_computed_average() -> None:
    decay = 0.8
    model = TinyMLP()
    initial = clone(model)
    steps, ema_cb = StepRecorder(), ModelEmaCallback(decay=decay)
    val = blobs(n=9, seed=1)
    trainer = make_trainer(model, lr=0.3, callbacks=[steps, ema_cb])
    # 10 batches per epoch, accumulation 3 → 4 updates per epoch (3+3+3+1).
    trainer.train(
        blobs(n=40),
        num_epochs=2,
        per_device_batch_size=4,
        gradient_accumulation_steps=3,
        eval_dataset=val,
    )
    assert len(steps.weights) == trainer.state.global_step == 8, "updated every optimizer step"
    expected = {k: v.clone() for k, v in initial.state_dict().items()}
    for weights in steps.weights:
        for k in expected:
            expected[k] = decay * expected[k] + (1 - decay) * weights[k]
    assert ema_cb.ema_model is not None
    for k, v in ema_cb.ema_model.state_dict().items():
        torch.testing.assert_close(v, expected[k], atol=1e-6, rtol=0)
    # Evaluation used the EMA weights; the trained weights were put back afterwards.
    eval_loss = trainer.run_history.get_latest_metric("eval_loss_epoch")
    assert eval_loss == pytest.approx(dataset_loss(ema_cb.ema_model, val), rel=1e-5)
    for k, v in model.state_dict().items():
        assert torch.equal(v, steps.weights[-1][k]), k
    assert not torch.allclose(ema_cb.ema_model.net[0].weight, model.net[0].weight)


@pytest.mark.parametrize("as_url", [False, True])
def test_model_ema_can_save_its_weights(
    tmp_path: Path, as_url: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    target = (tmp_path / "ema.pt").as_uri() if as_url else tmp_path / "ema.pt"
    ema_cb = ModelEmaCallback(decay=0.5, save_path=target)
    trainer = make_trainer(TinyMLP(), callbacks=[ema_cb])
    trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=4)
    assert not (tmp_path / "file:").exists()
    restored = TinyMLP(seed=3)
    make_trainer(restored).load_checkpoint(target, load_optimizer=False)
    assert ema_cb.ema_model is not None
    assert_same_weights(restored, ema_cb.ema_model)


class BNNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def test_convert_sync_batchnorm() -> None:
    model = BNNet()
    param_ids = {id(p) for p in model.parameters()}
    trainer = make_trainer(model, callbacks=[ConvertSyncBatchNormCallback(always=True)])
    assert isinstance(trainer.model.net[1], nn.SyncBatchNorm)
    assert trainer.unwrapped_model is trainer.model
    assert {id(p) for p in trainer.model.parameters()} == param_ids, "the optimizer still owns them"
    before = trainer.model.net[1].running_mean.clone()
    trainer.train(blobs(n=16), num_epochs=2, per_device_batch_size=8)
    assert not torch.equal(trainer.model.net[1].running_mean, before)
    # In a single process, without ``always``, the model is left as it is.
    plain = make_trainer(BNNet(), callbacks=[ConvertSyncBatchNormCallback()])
    assert type(plain.model.net[1]) is nn.BatchNorm1d


def test_convert_sync_batchnorm_added_after_construction_still_converts() -> None:
    trainer = make_trainer(BNNet(), callbacks=[])
    trainer.add_callback(ConvertSyncBatchNormCallback(always=True))
    assert isinstance(trainer.model.net[1], nn.SyncBatchNorm)
    trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=8)
    # Once the model is wrapped for distributed training, adding it is an error.
    trainer.model = nn.parallel.DistributedDataParallel.__new__(nn.parallel.DistributedDataParallel)
    with pytest.raises(RuntimeError, match="added after the model was wrapped"):
        trainer.add_callback(ConvertSyncBatchNormCallback(always=True))


def test_save_training_state_writes_rotated_checkpoints_and_resumes(tmp_path: Path) -> None:
    directory = tmp_path / "ckpt"
    data = blobs(n=24)
    reference = TinyMLP()
    make_trainer(reference, seed=3).train(data, num_epochs=2, per_device_batch_size=4)

    saver = SaveTrainingStateCallback(directory, every_n_steps=2, keep_last=2)
    first = make_trainer(TinyMLP(), callbacks=[saver], seed=3)
    # saves at steps 2 and 4, then at the epoch end (step 6: once, not also as a step save)
    first.train(data, num_epochs=1, per_device_batch_size=4)
    assert saver._manager is not None
    saver._manager.wait()  # rotation deletes old files in the background
    files = sorted(p.name for p in directory.glob("*.pt"))
    assert len(files) == 2, files  # older ones rotated away
    assert ["step4" in files[0], "step6" in files[1]] == [True, True], files

    resumed = TinyMLP(seed=9)
    second = make_trainer(resumed, seed=3)
    second.train(data, num_epochs=2, per_device_batch_size=4, resume_from=directory)
    assert second.state.global_step == 12
    assert len(second.run_history.get_metric_values("train_loss_epoch")) == 2
    assert_same_weights(resumed, reference)


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="decay must be in"):
        ModelEmaCallback(decay=1.0)
    with pytest.raises(ValueError, match=r"every_n_steps must be a whole number ≥ 1.*received 0"):
        SaveTrainingStateCallback(tmp_path, every_n_steps=0)
    with pytest.raises(ValueError, match=r"every_n_epochs must be a whole number ≥ 1.*0\.5"):
        SaveTrainingStateCallback(tmp_path, every_n_epochs=0.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keep_best=1 needs monitor="):
        SaveTrainingStateCallback(tmp_path, keep_best=1)
    with pytest.raises(ValueError, match="mode must be 'min' or 'max'; received 'lowest'"):
        SaveTrainingStateCallback(tmp_path, keep_best=1, monitor="score", mode="lowest")


def test_save_training_state_keeps_the_best_checkpoint_by_a_metric(tmp_path: Path) -> None:
    scores = [0.5, 0.1, 0.4, 0.3]  # the best (epoch 2) is neither the first nor the newest

    class Score(TrainerCallback):
        def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
            trainer.run_history.update_metric("score", scores[trainer.state.epoch])

    saver = SaveTrainingStateCallback(
        tmp_path / "ckpt", keep_last=1, keep_best=1, monitor="score", async_write=False
    )
    trainer = make_trainer(TinyMLP(), callbacks=[Score(), saver])
    trainer.train(blobs(n=8), num_epochs=4, per_device_batch_size=4)
    assert saver._manager is not None
    saver._manager.wait()
    kept = sorted(p.name for p in (tmp_path / "ckpt").glob("*.pt"))
    assert len(kept) == 2 and "step4" in kept[0] and "step8" in kept[1], kept
    assert saver._manager.best_path is not None and "step4" in saver._manager.best_path.name
