"""A baseline evaluate() before train() with the same Experiment: train() from step 0 went
on in the evaluation-only folder, recorded as "resumed" (nothing was), and the untrained
model's results stayed the trained run's results in list_runs and `scramjet runs`. The
training is now a run of its own that names the evaluation as its previous run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback
from scramjet.tracking import Experiment, list_runs


def test_training_after_a_baseline_evaluation_is_a_new_run(tmp_path: Path) -> None:
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    data = list(zip(x, (x.sum(1) > 0).long(), strict=True))
    model = torch.nn.Linear(4, 2)
    exp = Experiment("p", "e", root=tmp_path, checkpoint=None)
    trainer = Trainer(model, torch.nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.5),
                      callbacks=[exp], seed=0)  # fmt: skip
    trainer.evaluate(data, per_device_batch_size=16)  # the untrained baseline
    exp.log_results("test", {"accuracy": 0.5})
    baseline = exp.run_dir
    trainer.train(data, num_epochs=2, eval_dataset=data, per_device_batch_size=16)
    trained = exp.run_dir
    assert trained != baseline
    info = json.loads((trained / "run.json").read_text())
    assert info["status"] == "finished" and "resumed" not in info
    assert info["previous_run"] == baseline.name
    assert not (trained / "results" / "test.json").exists()
    runs = {Path(r["run_dir"]).name: r for r in list_runs(tmp_path)}
    assert runs[baseline.name]["metrics"]["test/accuracy"] == 0.5
    assert "test/accuracy" not in runs[trained.name]["metrics"]
    assert "eval_loss_epoch" in runs[trained.name]["metrics"]


def test_a_relaunch_that_evaluates_first_still_resumes(tmp_path: Path) -> None:
    # Experiment(resume="auto"): a baseline evaluate() before train() in the relaunched
    # script must not make the training a new run from step 0.
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    data = list(zip(x, (x.sum(1) > 0).long(), strict=True))

    def launch() -> tuple[Experiment, Trainer]:
        model = torch.nn.Linear(4, 2)
        exp = Experiment("p", "e", root=tmp_path, checkpoint="epoch", resume="auto")
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        return exp, Trainer(model, torch.nn.CrossEntropyLoss(), opt, callbacks=[exp], seed=0)

    exp, trainer = launch()
    trainer.train(data, num_epochs=2, per_device_batch_size=16)
    first = exp.run_dir
    exp, trainer = launch()
    trainer.evaluate(data, per_device_batch_size=16)
    steps: list[int] = []
    trainer.callback_handler.add_callback(_FirstStep(steps))
    trainer.train(data, num_epochs=4, per_device_batch_size=16)
    assert exp.run_dir == first and steps[0] == 8, (exp.run_dir, steps)  # resumed at step 8
    assert len(json.loads((first / "run.json").read_text())["resumed"]) == 1


class _FirstStep(TrainerCallback):
    def __init__(self, steps: list[int]) -> None:
        self.steps = steps

    def on_training_run_start(self, trainer: Any, **kwargs: Any) -> None:
        self.steps.append(trainer.state.global_step)
