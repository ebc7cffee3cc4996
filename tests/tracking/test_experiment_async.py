"""Experiment with background checkpoint writes: durable at the end, uploaded once written."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
from tracking_helpers import make_trainer, tiny_data

from scramjet.callbacks import TrainerCallback
from scramjet.checkpoint import CheckpointManager
from scramjet.tracking import Experiment


class _RemoteWatcher(TrainerCallback):
    """At the start of each epoch, notes which checkpoints the remote folder already holds."""

    def __init__(self, exp: Experiment) -> None:
        self.exp = exp
        self.remote_at_epoch: list[set[str]] = []

    def on_train_epoch_start(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.epoch < 2:
            return
        remote = Path(str(self.exp.remote_url).removeprefix("file://")) / "checkpoints"
        deadline = time.monotonic() + 20  # the upload threads get a moment to catch up
        names: set[str] = set()
        while time.monotonic() < deadline:
            names = {p.name for p in remote.glob("ckpt-*.pt")} if remote.is_dir() else set()
            if names:
                break
            time.sleep(0.05)
        self.remote_at_epoch.append(names)


def test_checkpoints_are_durable_and_mirrored_when_train_returns(tmp_path: Path) -> None:
    exp = Experiment(
        "proj",
        "async",
        root=tmp_path / "runs",
        storage=f"file://{tmp_path / 'remote'}",
        keep_last=2,
        keep_best=0,
        sync_every_s=0,  # mirror every epoch, so a checkpoint goes up mid-run
        save_script=False,
    )
    watcher = _RemoteWatcher(exp)
    trainer = make_trainer([exp, watcher])
    trainer.train(tiny_data(), 3, eval_dataset=tiny_data(30, 1), per_device_batch_size=16)

    # An epoch-1 checkpoint reached the remote during the run: it was uploaded once the
    # background write had made it complete (its name is known only from the writer).
    assert watcher.remote_at_epoch and watcher.remote_at_epoch[0], watcher.remote_at_epoch
    assert exp._manager is not None and not exp._manager.pending
    manager = CheckpointManager(exp.checkpoint_dir, keep_last=None)
    assert [c.epoch for c in manager.checkpoints()] == [2, 3]  # keep_last=2, all on disk
    weights = trainer.unwrapped_model.state_dict()
    saved = manager.load().values["model"]
    assert all(torch.equal(saved[k], v) for k, v in weights.items())
    assert exp.upload_report is not None and exp.upload_report.ok
    remote = tmp_path / "remote" / "proj" / exp.run_dir.name / "checkpoints"
    assert sorted(p.name for p in remote.glob("ckpt-*.pt")) == [
        c.path.name for c in manager.checkpoints()
    ]


def test_sync_checkpoints_still_work(tmp_path: Path) -> None:
    exp = Experiment("proj", "sync", root=tmp_path, async_checkpoint=False, save_script=False)
    make_trainer([exp]).train(tiny_data(), 2, per_device_batch_size=16)
    assert exp._manager is not None and not exp._manager.async_write
    assert CheckpointManager(exp.checkpoint_dir).load().epoch == 2
