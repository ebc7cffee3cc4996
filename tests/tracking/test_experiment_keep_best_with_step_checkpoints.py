"""``Experiment(checkpoint=N, keep_best=K)`` keeps the best evaluated weights.

A checkpoint saved every N steps in the middle of an epoch carries no epoch metric (its
weights are not the ones the evaluation measured), so with step checkpoints only the
run's last one was ever ranked: ``keep_best`` kept whatever the run ended with, and the
best epoch's weights were never saved. With ``keep_best`` the Experiment now also saves
at each epoch's end, after its evaluation; a step save that falls on the epoch's last
update is that same save (the same weights), written once, with the metrics.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback
from scramjet.tracking import Experiment

SCORES = [0.3, 0.9, 0.5, 0.2, 0.6]  # eval_acc of epochs 1..5: the best is epoch 2


class Score(TrainerCallback):
    def on_eval_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        epoch = len(trainer.run_history.get_metric_values("eval_loss_epoch"))
        trainer.log("eval_acc", SCORES[epoch - 1])


def run(root: Path, **options: Any) -> tuple[dict[str, Any], list[tuple[int, Any]]]:
    torch.manual_seed(0)
    x = torch.randn(96, 4)
    data = list(zip(x, (x.sum(dim=1) > 0).long()))
    model = torch.nn.Linear(4, 2)
    exp = Experiment("kb", "e", root=root, checkpoint=2, monitor="eval_acc", mode="max",
                     save_script=False, **options)  # fmt: skip
    trainer = Trainer(model, torch.nn.CrossEntropyLoss(),
                      torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[exp, Score()])  # fmt: skip
    trainer.train(data, num_epochs=5, eval_dataset=data, per_device_batch_size=32)  # 3 steps
    index = json.loads((exp.checkpoint_dir / "index.json").read_text())
    saved = [(c["step"], c["metrics"].get("eval_acc")) for c in index["checkpoints"]]
    return index, saved


def test_keep_best_keeps_the_best_epochs_weights(tmp_path: Path) -> None:
    index, saved = run(tmp_path, keep_best=1, keep_last=1)
    assert index["best"].endswith("step6.pt")  # the end of epoch 2: eval_acc 0.9
    assert saved == [(6, 0.9), (15, 0.6)]  # the best, and the newest


def test_every_step_save_and_every_epoch_end_is_written_once(tmp_path: Path) -> None:
    _, saved = run(tmp_path, keep_best=1, keep_last=None)
    steps = [step for step, _ in saved]
    assert steps == sorted(set(steps))  # no step written twice
    # every 2 steps (mid-epoch: no metric), and each epoch's end with its evaluation; a
    # step save on an epoch's last update (6, 12) is that epoch's save
    assert saved == [
        (2, None), (3, 0.3), (4, None), (6, 0.9), (8, None), (9, 0.5), (10, None),
        (12, 0.2), (14, None), (15, 0.6),
    ]  # fmt: skip


def test_without_keep_best_only_the_step_saves_and_the_last_are_written(tmp_path: Path) -> None:
    _, saved = run(tmp_path, keep_best=0, keep_last=None)
    assert [step for step, _ in saved] == [2, 4, 6, 8, 10, 12, 14, 15]
