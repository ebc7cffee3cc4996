"""One small tracked run shared by the logger tests, and its metrics.csv as the reference."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracking_helpers import make_trainer, tiny_data

from scramjet.callbacks import TrainerCallback
from scramjet.tracking import Experiment, read_metrics


class LogExtra(TrainerCallback):
    """A per-step and a per-epoch value through ``trainer.log``."""

    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        trainer.log("extra_step", 0.5 * trainer.state.global_step)

    def on_train_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        trainer.log("extra_epoch", float(trainer.run_history.current_epoch))


def tracked_run(root: Path, loggers: tuple[Any, ...], experiment: str = "log") -> Experiment:
    """2 epochs of 6 steps with evaluation, then ``log_results("test", ...)`` after the run."""
    exp = Experiment(
        "proj",
        experiment,
        root=root,
        loggers=loggers,
        hyperparams={"lr": 0.2, "width": 16, "note": "baseline", "layers": [16, 8], "seed": None},
        log_every_n_steps=4,
    )
    trainer = make_trainer([exp, LogExtra()])
    trainer.train(tiny_data(), 2, eval_dataset=tiny_data(30, 1), per_device_batch_size=16)
    exp.log_results("test", {"accuracy": 0.75, "per_class": {"a": 0.5}})
    return exp


def csv_series(run: Path) -> dict[str, list[tuple[int, float, float]]]:
    """``{name: [(step, value, time), ...]}`` from metrics.jsonl, both scopes."""
    out: dict[str, list[tuple[int, float, float]]] = {}
    for row in read_metrics(run):
        for name, value in row["metrics"].items():
            out.setdefault(name, []).append((row["step"], value, row["time"]))
    return out
