"""A resumed Experiment writes only under its own root: the run folder stored in a
checkpoint is a hint (its name), never a destination. Resuming from a copy of a run leaves
the original untouched; a crafted path in a checkpoint writes nothing outside the root."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import torch
from tracking_helpers import make_trainer, tiny_data

from scramjet.checkpoint import CheckpointManager, read_checkpoint
from scramjet.tracking import Experiment


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _train(exp: Experiment, epochs: int, **kwargs: object) -> None:
    make_trainer([exp]).train(tiny_data(), epochs, per_device_batch_size=16, **kwargs)


def test_resuming_a_copied_run_leaves_the_original_untouched(tmp_path: Path) -> None:
    first = Experiment("p", "e", root=tmp_path / "a", log_every_n_steps=1, keep_last=1)
    _train(first, 2)
    original = _digests(first.run_dir)
    copy = tmp_path / "b" / "p" / first.run_dir.name
    shutil.copytree(first.run_dir, copy)

    resumed = Experiment("p", "e", root=tmp_path / "b", log_every_n_steps=1, keep_last=1)
    _train(resumed, 4, resume_from=copy / "checkpoints")

    assert resumed.run_dir == copy.resolve()
    assert _digests(first.run_dir) == original  # not one byte of the original changed
    latest = CheckpointManager(copy / "checkpoints", keep_last=None).checkpoints()[-1]
    assert latest.epoch == 4  # the copy went on to epoch 4


def test_a_crafted_run_dir_in_a_checkpoint_writes_nothing_outside_the_root(
    tmp_path: Path,
) -> None:
    first = Experiment("p", "e", root=tmp_path / "runs", log_every_n_steps=1)
    _train(first, 1)
    ckpt = CheckpointManager(first.checkpoint_dir, keep_last=None).checkpoints()[-1].path
    victim = tmp_path / "victim"
    (victim / "checkpoints").mkdir(parents=True)
    (victim / "run.json").write_text("{}")
    before = _digests(victim)

    payload = read_checkpoint(ckpt)
    saved = payload["state"]["callbacks"]
    key = next(k for k in saved if k.endswith(":Experiment"))
    saved[key]["run_dir"] = str(victim)  # points outside the Experiment's root
    state = {name: value for name, value in payload["state"].items()}
    manager = CheckpointManager(tmp_path / "crafted", keep_last=None)
    manager.save(state, step=payload["step"], epoch=payload["epoch"])
    manager.close()

    other = Experiment("p", "e", root=tmp_path / "runs", log_every_n_steps=1)
    _train(other, 2, resume_from=tmp_path / "crafted")
    assert _digests(victim) == before
    assert other.run_dir.parent == (tmp_path / "runs" / "p").resolve()
    assert torch.load(other.run_dir / "model" / "model.pt", weights_only=True)
