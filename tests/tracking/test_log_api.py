"""trainer.log / log_dict: from hooks and callbacks, per step or per epoch, at the right step,
with each step's own wall time, reduced across processes when asked, cheap when unheard."""

from __future__ import annotations

import itertools
import json
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.common.torchrun import run_torchrun
from tracking_helpers import make_trainer, tiny_data, tiny_model

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback
from scramjet.tracking import Experiment, read_metrics


class _LoggingTrainer(Trainer):
    def calculate_train_batch_loss(self, batch: Any) -> dict[str, Any]:
        out = super().calculate_train_batch_loss(batch)
        # a hook, during a micro-step: belongs to the update in progress
        self.log("hook_batch", float(self.state.batches_seen_in_epoch))
        return out

    def optimizer_step(self) -> None:
        super().optimizer_step()
        norm = torch.stack([p.detach().norm() for p in self.model.parameters()]).norm()
        self.log_dict({"weight_norm": norm, "hook_update": float(self.state.global_step + 1)})


class _Logs(TrainerCallback):
    def on_train_step_end(self, trainer: Any, batch: Any, batch_output: Any, **kw: Any) -> None:
        trainer.log("cb_loss_x2", batch_output["loss"] * 2)  # a tensor: no sync here

    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        trainer.log("cb_step", 10.0 * trainer.state.global_step)

    def on_train_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        trainer.log("cb_epoch", 1.5 * trainer.run_history.current_epoch)


def _train(tmp_path: Path, accumulation: int) -> tuple[Experiment, Trainer]:
    exp = Experiment("p", "log", root=tmp_path, log_every_n_steps=2, checkpoint=None)
    model = tiny_model()
    trainer = _LoggingTrainer(
        model,
        torch.nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.2),
        callbacks=[exp, _Logs()],
        seed=0,
    )
    trainer.train(
        tiny_data(),
        2,
        eval_dataset=tiny_data(30, 1),
        per_device_batch_size=16,
        gradient_accumulation_steps=accumulation,
    )
    return exp, trainer


def _series(run: Path, scope: str) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {}
    for row in read_metrics(run):
        if row["scope"] == scope:
            for name, value in row["metrics"].items():
                out.setdefault(name, {})[row["step"]] = value
    return out


def test_values_from_hooks_and_callbacks_land_on_their_update(tmp_path: Path) -> None:
    exp, trainer = _train(tmp_path, accumulation=2)  # 6 batches an epoch: 3 updates
    steps = _series(exp.run_dir, "step")
    assert list(steps["train_loss"]) == [1, 2, 3, 4, 5, 6]
    step_rows = [r["step"] for r in read_metrics(exp.run_dir) if r["scope"] == "step"]
    assert step_rows == [1, 2, 3, 4, 5, 6], "one row per step, callbacks after the Experiment too"
    for name in ("hook_batch", "weight_norm", "hook_update", "cb_loss_x2", "cb_step", "lr"):
        assert list(steps[name]) == [1, 2, 3, 4, 5, 6], name
    # logged in on_optimizer_step_end after update k: step k
    assert steps["cb_step"] == {k: 10.0 * k for k in range(1, 7)}
    # logged in optimizer_step (before the counter moves): the same update
    assert steps["hook_update"] == {k: float(k) for k in range(1, 7)}
    # micro-steps of one window are averaged: batches (0, 1) -> 0.5, (2, 3) -> 2.5, ...
    assert steps["hook_batch"] == {1: 0.5, 2: 2.5, 3: 4.5, 4: 0.5, 5: 2.5, 6: 4.5}
    assert steps["cb_loss_x2"] == pytest.approx({k: 2 * v for k, v in steps["train_loss"].items()})
    # epoch values: in run_history (callbacks read them) and in epoch rows at the global step
    assert trainer.run_history.get_metric_values("cb_epoch") == [1.5, 3.0]
    epochs = _series(exp.run_dir, "epoch")
    assert epochs["cb_epoch"] == {3: 1.5, 6: 3.0}
    assert set(epochs) == {"cb_epoch", "train_loss_epoch", "eval_loss_epoch"}


def test_step_rows_carry_their_own_wall_time(tmp_path: Path) -> None:
    class Slow(TrainerCallback):
        def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
            time.sleep(0.03)

    exp = Experiment("p", "t", root=tmp_path, log_every_n_steps=100, checkpoint=None)
    make_trainer([Slow(), exp]).train(tiny_data(), 2, per_device_batch_size=16)
    rows = [r for r in read_metrics(exp.run_dir) if r["scope"] == "step"]
    times = [r["time"] for r in rows]
    assert [r["step"] for r in rows] == list(range(1, 13))
    assert len(set(times)) == 12, "one wall time per step, not the flush time"
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= 0.025, gaps  # each step took at least the callback's sleep


def test_unheard_step_values_are_dropped_cheaply_and_bad_input_is_explained() -> None:
    trainer = make_trainer([])
    calls = []

    class Log(TrainerCallback):
        def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
            started = time.perf_counter()
            for _ in range(200):
                trainer.log("x", 1.0)
            calls.append((time.perf_counter() - started) / 200)

    trainer.add_callback(Log())
    trainer.train(tiny_data(), 1, per_device_batch_size=16)
    assert "x" not in trainer.run_history.get_metric_names(), "step values are not history"
    assert sorted(calls)[len(calls) // 2] < 20e-6, f"median {sorted(calls)[len(calls) // 2]}"
    trainer.log("after", 2.0)  # outside the training batches: an epoch value
    assert trainer.run_history.get_latest_metric("after") == 2.0
    with pytest.raises(ValueError, match=r"non-empty string.*received ''"):
        trainer.log("", 1.0)
    with pytest.raises(TypeError, match=r"type str; expected a number"):
        trainer.log("a", "high")
    with pytest.raises(ValueError, match=r"shape \(2,\); expected one value"):
        trainer.log("a", torch.ones(2))
    with pytest.raises(ValueError, match=r"reduce=.*received 'avg'"):
        trainer.log("a", 1.0, reduce="avg")
    with pytest.raises(ValueError, match=r"step=.*received -1"):
        trainer.metric_log.subscribe(lambda *a: None)
        trainer.log("a", 1.0, step=-1)


def test_explicit_step_and_every_logger_gets_the_same_names(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    class AtStep(TrainerCallback):
        def on_train_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
            trainer.log("probe", 7.0, step=2)

    exp = Experiment("p", "names", root=tmp_path, loggers=("csv", "tensorboard"), checkpoint=None)
    make_trainer([exp, AtStep(), _Logs()]).train(tiny_data(), 1, per_device_batch_size=16)
    csv_names = {n for r in read_metrics(exp.run_dir) for n in r["metrics"]}
    assert _series(exp.run_dir, "step")["probe"] == {2: 7.0}
    acc = EventAccumulator(str(exp.run_dir))
    acc.Reload()
    assert set(acc.Tags()["scalars"]) == csv_names | {"epoch"}


_REDUCE_SCRIPT = """
import json, sys
sys.path[:0] = [{root!r}, {tests!r}]
import torch
from scramjet.callbacks import TrainerCallback
from scramjet.runtime import distributed as dist
from tracking_helpers import make_trainer, tiny_data

class Ranked(TrainerCallback):
    def on_optimizer_step_end(self, trainer, **kwargs):
        rank = dist.get_rank()
        trainer.log("rank_mean", torch.tensor(float(rank)), reduce="mean")
        trainer.log("rank_max", float(rank), reduce="max")
        trainer.log("rank_own", float(rank))

    def on_train_epoch_end(self, trainer, **kwargs):
        trainer.log("rank_sum", float(dist.get_rank() + 1), reduce="sum")

seen = []
trainer = make_trainer([Ranked()])
trainer.metric_log.subscribe(lambda step, values, t: seen.append(
    (step, {{k: float(v) for k, v in values.items()}})))
trainer.train(tiny_data(), 1, per_device_batch_size=16)
if dist.is_main_process():
    print("SEEN", json.dumps([seen, trainer.run_history.get_metric_values("rank_sum")]))
"""


def test_reduce_combines_values_across_processes(tmp_path: Path) -> None:
    tests = Path(__file__).parent
    script = tmp_path / "reduce.py"
    body = _REDUCE_SCRIPT.format(root=str(tests.parent.parent), tests=str(tests))
    script.write_text(textwrap.dedent(body))
    out = run_torchrun(script)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("SEEN "))
    seen, sums = json.loads(line[5:])
    steps = [step for step, _ in seen if "rank_mean" in _]
    assert steps == [1, 2, 3]  # 96 samples, 2 processes, 16 per batch
    for step, values in seen:
        key = next(iter(values))
        expected = {"rank_mean": 0.5, "rank_max": 1.0, "rank_own": 0.0}[key]
        assert values[key] == expected, (step, values)
    assert sums == [3.0], "an epoch value reduced with sum: 1 + 2"
