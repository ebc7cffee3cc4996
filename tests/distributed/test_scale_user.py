"""One user script, unchanged, in one process and under ``torchrun --nproc-per-node 2``
with the same global batch: BatchNorm, SyncBatchNorm on CPU, and what an Experiment
records per step.

This file is also the job: ``python test_scale_user.py OUT`` (run by torchrun in every
process, or by the tests in their own process) writes ``OUT/rank{r}.pt``.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import Dataset

from scramjet.callbacks import TrainerCallback as TrainerCallbackBase

HERE = Path(__file__).resolve()
GLOBAL_BATCH, NUM_TRAIN, NUM_EVAL = 8, 48, 33  # 33: not a multiple of 2 processes


class Points(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 6, generator=g)
        self.y = (self.x[:, 0] + self.x[:, 1] > 0).long()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i], self.y[i]


def make_model(norm: bool) -> nn.Module:
    with torch.random.fork_rng():
        torch.manual_seed(0)
        middle = nn.BatchNorm1d(16) if norm else nn.Identity()
        return nn.Sequential(nn.Linear(6, 16), middle, nn.ReLU(), nn.Linear(16, 2))


def train(norm: bool, root: Path | None = None, callbacks: tuple[Any, ...] = ()) -> Any:
    """The user's training: accumulation, clipping, a scheduler, an uneven eval set."""
    from scramjet import Trainer
    from scramjet.runtime import distributed as dist
    from scramjet.schedulers import CosineWarmupScheduler
    from scramjet.tracking import Experiment

    model = make_model(norm)
    extra: list[Any] = list(callbacks)
    if root is not None:
        extra.append(Experiment("scale", "user", root=root, save_script=False))
    trainer = Trainer(
        model,
        nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        callbacks=extra,
        seed=0,
    )
    trainer.train(
        Points(NUM_TRAIN, 1),
        num_epochs=2,
        eval_dataset=Points(NUM_EVAL, 2),
        per_device_batch_size=GLOBAL_BATCH // dist.get_world_size(),
        gradient_accumulation_steps=2,
        gradient_clip_norm=0.5,
        create_scheduler_fn=CosineWarmupScheduler.create_scheduler_fn(num_warmup_epochs=1),
    )
    return trainer


class ShardScore(TrainerCallbackBase):
    """A per-rank score (say, accuracy on this rank's share of the evaluation) logged
    without ``reduce``: rank 0's gets worse after the first epoch, rank 1's better."""

    def on_eval_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        from scramjet.runtime import distributed as dist

        sign = -1 if dist.get_rank() == 0 else 1
        trainer.log("shard_score", 0.5 + sign * 0.1 * trainer.state.epoch)


def early_stop_job(out: Path) -> None:
    from scramjet import Trainer
    from scramjet.callbacks import EarlyStoppingCallback
    from scramjet.runtime import distributed as dist

    model = make_model(norm=False)
    stop = EarlyStoppingCallback(watch_metric="shard_score", greater_is_better=True)
    trainer = Trainer(
        model,
        nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[ShardScore(), stop],
        seed=0,
    )
    data = Points(16, 1)
    trainer.train(data, num_epochs=4, eval_dataset=data, per_device_batch_size=4)
    epochs = trainer.state.epoch
    ranks = dist.gather_object((epochs, trainer.run_history.get_metric_values("shard_score")))
    torch.save({"ranks": ranks}, out / f"stop{dist.get_rank()}.pt")


def slow_rank_job() -> None:
    """Rank 1 arrives at the first all-reduce a minute late (a stuck or much slower rank)."""
    import time

    from scramjet.runtime import distributed as dist

    if dist.get_rank() == 1:
        time.sleep(60)
    dist.reduce(torch.ones(1), "sum")


def job(out: Path) -> None:
    from scramjet.callbacks import ConvertSyncBatchNormCallback
    from scramjet.runtime import distributed as dist

    report: dict[str, Any] = {"world": dist.get_world_size()}
    trainer = train(norm=True)
    report["bn_state"] = {k: v.clone() for k, v in trainer.unwrapped_model.state_dict().items()}
    report["bn_eval_loss"] = trainer.run_history.get_latest_metric("eval_loss_epoch")
    report["bn_predictions"] = trainer.predict(Points(NUM_EVAL, 2))
    train(norm=False, root=out / f"runs{dist.get_world_size()}")
    try:
        train(norm=True, callbacks=(ConvertSyncBatchNormCallback(),))
        report["sync_bn"] = "trained"
    except ValueError as error:
        report["sync_bn"] = str(error)
    torch.save(report, out / f"rank{dist.get_rank()}.pt")


def step_losses(root: Path) -> dict[int, float]:
    (metrics,) = root.glob("scale/*/metrics.csv")
    with metrics.open() as f:
        rows = [r for r in csv.DictReader(f) if r["scope"] == "step" and r["name"] == "train_loss"]
    return {int(r["step"]): float(r["value"]) for r in rows}


# --------------------------------------------------------------------------- the tests


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    from tests.common.torchrun import run_torchrun

    out = tmp_path_factory.mktemp("scale_user")
    done = run_torchrun(HERE, str(out), nproc=2)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Warning" not in done.stderr, done.stderr[-4000:]  # no deprecated DDP argument
    return out, [torch.load(out / f"rank{r}.pt", weights_only=False) for r in (0, 1)]


@pytest.mark.slow
@pytest.mark.distributed
def test_batchnorm_replicas_evaluate_and_predict_with_the_model_rank_zero_saves(
    two_ranks: tuple[Path, list[dict[str, Any]]],
) -> None:
    # Each rank used to keep the running statistics of its own last batch: the checkpoint
    # (rank 0) held one model, rank 1 evaluated and predicted its rows with another.
    _, (r0, r1) = two_ranks
    for name, value in r0["bn_state"].items():
        assert torch.equal(value, r1["bn_state"][name]), f"{name} differs between the ranks"
    saved = make_model(norm=True)
    saved.load_state_dict(r0["bn_state"])
    data = Points(NUM_EVAL, 2)
    with torch.no_grad():
        logits = saved.eval()(data.x)
    torch.testing.assert_close(r0["bn_predictions"], logits, atol=1e-6, rtol=0)
    loss = nn.functional.cross_entropy(logits, data.y).item()
    assert r0["bn_eval_loss"] == pytest.approx(loss, abs=1e-6)


@pytest.mark.slow
@pytest.mark.distributed
def test_sync_batchnorm_on_cpu_processes_is_refused_with_the_layers_and_the_fix(
    two_ranks: tuple[Path, list[dict[str, Any]]],
) -> None:
    # DDP's own error said only "SyncBatchNorm layers only work with GPU modules".
    _, reports = two_ranks
    for report in reports:
        message = report["sync_bn"]
        assert "SyncBatchNorm layers ('1')" in message, message
        assert "cpu with 2 processes" in message
        assert "leave out ConvertSyncBatchNormCallback" in message


@pytest.mark.slow
@pytest.mark.distributed
def test_experiment_step_train_loss_is_the_global_batch_loss(
    two_ranks: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    out, _ = two_ranks
    train(norm=False, root=tmp_path)  # one process, the same global batch
    one, two = step_losses(tmp_path), step_losses(out / "runs2")
    assert one.keys() == two.keys() == set(range(1, 7))
    for step, value in one.items():
        assert two[step] == pytest.approx(value, abs=1e-5), f"step {step}"


if __name__ == "__main__":
    from scramjet.runtime import distributed as dist

    dist.init_distributed()
    if sys.argv[2:] == ["slow-rank"]:
        slow_rank_job()
    else:
        (early_stop_job if sys.argv[2:] == ["early-stop"] else job)(Path(sys.argv[1]))
    dist.destroy_distributed()


GLOO_TIMEOUT = (
    "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
    "Timed out waiting 5000ms for recv operation to complete"
)


def test_a_collective_timeout_says_the_reporting_rank_waited_and_names_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The launcher names the first rank that failed: with a stuck rank 1, that is rank 0,
    # whose only message was gloo's "Timed out waiting 5000ms".
    from scramjet.runtime import LaunchError

    monkeypatch.setenv("SCRAMJET_DIST_TIMEOUT", "5")
    failures = {0: GLOO_TIMEOUT, 1: "killed by SIGTERM"}
    text = str(LaunchError(0, GLOO_TIMEOUT, "", failures))
    first, hint = text.splitlines()[:2]
    assert first == f"rank 0 failed: {GLOO_TIMEOUT}"
    assert hint.startswith("rank 0 gave up waiting for the other ranks in a collective")
    assert "rank 1: still running, stopped by the launcher (SIGTERM)" in hint
    assert "SCRAMJET_DIST_TIMEOUT (5 s here): raise it" in hint
    monkeypatch.delenv("SCRAMJET_DIST_TIMEOUT")
    assert "SCRAMJET_DIST_TIMEOUT (300 s by default)" in str(LaunchError(0, GLOO_TIMEOUT, "", {}))
    lost = "RuntimeError: [...pair.cc:553] Connection closed by peer [127.0.0.1]:1439"
    assert "lost its connection to another rank" in str(LaunchError(1, lost, "", {1: lost}))
    plain = str(LaunchError(1, "ValueError: bad shard", "", {1: "ValueError: bad shard"}))
    assert plain == "rank 1 failed: ValueError: bad shard"  # an ordinary error: no hint


@pytest.mark.slow
@pytest.mark.distributed
def test_scramjet_launch_with_a_stuck_rank_explains_the_timeout(tmp_path: Path) -> None:
    import os
    import subprocess

    cmd = [sys.executable, "-m", "scramjet.cli", "launch", "--nproc-per-node", "2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SCRAMJET_DIST_TIMEOUT": "3"}
    done = subprocess.run(
        [*cmd, str(HERE), str(tmp_path), "slow-rank"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("scramjet launch: rank 0")]
    assert len(starts) == 1, done.stderr[-3000:]
    at = starts[0]
    assert "Timed out waiting 3000ms" in lines[at], lines[at]
    assert "rank 1: still running, stopped by the launcher" in lines[at + 1], lines[at + 1]
    assert "SCRAMJET_DIST_TIMEOUT (3 s here)" in lines[at + 1]


@pytest.mark.distributed  # 4 s: in the default run, as the stop agreement has no other test
def test_a_stop_decided_on_one_rank_ends_the_run_on_every_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.common.torchrun import run_torchrun

    monkeypatch.setenv("SCRAMJET_DIST_TIMEOUT", "10")  # a rank left waiting fails fast
    done = run_torchrun(HERE, str(tmp_path), "early-stop", nproc=2, timeout=90)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = torch.load(tmp_path / "stop0.pt", weights_only=False)["ranks"]
    (epochs0, scores0), (epochs1, scores1) = ranks
    assert epochs0 == epochs1  # both ranks stopped after the same epoch
    # the value is not reduced, so each rank's history holds its own (documented); the
    # ranks did disagree, which is what the stop had to survive
    assert scores0 != scores1 and len(scores0) == len(scores1) == epochs0 + 1
