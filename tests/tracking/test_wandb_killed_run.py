"""A W&B offline run whose training process is killed outright (SIGKILL): the values of
every step the metric files got a few seconds before the kill is in its ``.wandb`` file,
but the last one (W&B keeps a step open until a later one arrives)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("wandb")

from wandb_records import read_wandb_run

from scramjet.tracking.loggers.csv import read_metrics

_SCRIPT = """
import os, signal, sys, time
import torch
from torch.utils.data import TensorDataset
from scramjet import Trainer, TrainerCallback
from scramjet.tracking import Experiment

KILL_AT = int(sys.argv[2])

class Kill(TrainerCallback):
    def on_train_step_end(self, trainer, **kwargs):
        if trainer.state.global_step == KILL_AT:
            time.sleep(3.5)  # longer than the loggers' flush intervals
            os.kill(os.getpid(), signal.SIGKILL)

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
exp = Experiment("proj", "killed", root=sys.argv[1], loggers=("wandb",),
                 checkpoint=None, log_every_n_steps=2)
trainer = Trainer(model, torch.nn.MSELoss(), torch.optim.SGD(model.parameters(), 0.1),
                  callbacks=[exp, Kill()])
trainer.train(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), 3,
              per_device_batch_size=8)
"""


def test_steps_logged_before_a_kill_survive_in_the_offline_run(tmp_path: Path) -> None:
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    kill_at = 12  # in the second epoch of 8 steps
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path), str(kill_at)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    (run_dir,) = tmp_path.glob("proj/*")
    history = read_wandb_run(run_dir)["history"]
    in_wandb = {row["_step"] for row in history}
    in_csv = {row["step"] for row in read_metrics(run_dir)}
    assert in_csv == set(range(1, kill_at)), "rows read before the kill reached metrics.csv"
    # every step but the last one W&B received (it keeps that one open for more values)
    assert in_wandb == in_csv - {max(in_csv)}, f"W&B: {sorted(in_wandb)}, csv: {sorted(in_csv)}"
    losses = {row["_step"]: row["train_loss"] for row in history if "train_loss" in row}
    csv_losses = {
        r["step"]: r["metrics"]["train_loss"]
        for r in read_metrics(run_dir)
        if "train_loss" in r["metrics"]
    }
    assert losses == pytest.approx({s: v for s, v in csv_losses.items() if s in in_wandb})
