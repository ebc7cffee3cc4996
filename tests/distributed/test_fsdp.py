"""FSDP2 (``fully_shard``) in real 2-process gloo runs, compared with one process; and a
distributed script that ends without destroying its process group exits cleanly."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import fsdp_job as job
import pytest
import torch
from dist_train_job import IndexedData, make_model
from test_dist_trainer import assert_close_weights, free_port
from torch import nn

from scramjet import Trainer
from scramjet.runtime import shard_model
from scramjet.runtime.fsdp import _default_units, is_sharded

pytestmark = pytest.mark.distributed

JOB = str(Path(__file__).with_name("fsdp_job.py"))
RUN_LIMIT_S = 90
# 2 ranks x batch 4 vs 1 process x batch 8, through sharded all-gather / reduce-scatter:
# the same maths, in another float summation order (observed differences ~3e-8).
TOL = 1e-5


def torchrun(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    cmd += ["--master-port", str(free_port()), JOB, *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    start = time.monotonic()
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=RUN_LIMIT_S, env=env, check=False
    )
    return done, time.monotonic() - start


def load(out: Path, rank: int) -> dict[str, Any]:
    return torch.load(out / f"rank{rank}.pt", weights_only=False)


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same job in this one process (shard_model is a no-op) with the global batch."""
    out = tmp_path_factory.mktemp("single")
    trainer = job.make_trainer(out / "ckpt")
    job.train(trainer)
    history = trainer.run_history.state_dict()
    trainer.evaluate(IndexedData(job.NUM_EVAL, seed=2), per_device_batch_size=8)
    return {
        "trainer": trainer,
        "ckpt": out / "ckpt",
        "weights": {k: v.clone() for k, v in trainer.unwrapped_model.state_dict().items()},
        "history": history,
        "evaluate_loss": trainer.run_history.get_latest_metric("eval_loss_epoch"),
        "predictions": trainer.predict(IndexedData(job.NUM_EVAL, seed=2), 8),
        "limited_eval_loss": job.limited_eval_loss(trainer),
    }


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("fsdp")
    done, _ = torchrun("full", str(out))
    assert done.returncode == 0, done.stderr[-4000:]
    return out, [load(out, 0), load(out, 1)]


def test_fsdp_training_matches_one_process_with_the_global_batch(
    sharded: tuple[Path, list[dict[str, Any]]], single: dict[str, Any]
) -> None:
    _, reports = sharded
    for rep in reports:
        assert rep["world"] == 2
        # Sharded in place, not wrapped in DDP; every parameter is a DTensor shard.
        assert rep["model_class"] == "FSDPSequential" and rep["param_types"] == ["DTensor"]
        assert rep["global_step"] == job.STEPS
        # Trained with accumulation, value clipping and norm clipping on DTensor gradients.
        assert_close_weights(rep["weights"], single["weights"], TOL)
        for name in ("train_loss_epoch", "eval_loss_epoch"):
            got, want = rep["history"]["metrics"][name], single["history"]["metrics"][name]
            assert got == pytest.approx(want, abs=TOL), name
    # Both ranks gathered the same full weights.
    for key, value in reports[0]["weights"].items():
        assert torch.equal(value, reports[1]["weights"][key])


def test_value_and_norm_clipping_both_change_the_job(monkeypatch: pytest.MonkeyPatch) -> None:
    # So that matching the single-process weights covers both clips on DTensor gradients.
    def weights() -> dict[str, torch.Tensor]:
        trainer = job.make_trainer(None)
        job.train(trainer)
        return trainer.unwrapped_model.state_dict()

    both = weights()
    for name in ("CLIP_VALUE", "CLIP_NORM"):
        with monkeypatch.context() as patch:
            patch.setattr(job, name, None)
            other = weights()
        assert max(float((both[k] - other[k]).abs().max()) for k in both) > 100 * TOL, name


def test_accumulation_reduces_gradients_once_per_update(
    sharded: tuple[Path, list[dict[str, Any]]],
) -> None:
    # Two sharded units (the Linear layers) → one reduce-scatter each per synced backward.
    # 10 micro-batches in 6 windows: set_requires_gradient_sync(False) on the 4 micro-steps
    # that are not the last of their window leaves 6 synced backwards (20 if every one synced).
    for rep in sharded[1]:
        assert rep["reduce_scatters"] == 2 * job.STEPS


def test_eval_loss_counts_real_samples_only(
    sharded: tuple[Path, list[dict[str, Any]]], single: dict[str, Any]
) -> None:
    # 33 samples, batches of 4: rank 0 runs 5 batches, rank 1 runs 4 and repeats one whose
    # outputs are discarded; the loss is the mean over the 33 real samples.
    for rep in sharded[1]:
        assert rep["evaluate_loss"] == pytest.approx(single["evaluate_loss"], abs=TOL)
        # end_epoch() after 3 steps ends the evaluation on every rank at the same step.
        assert rep["limited_eval_loss"] == pytest.approx(single["limited_eval_loss"], abs=TOL)
        assert rep["limited_eval_loss"] != pytest.approx(single["evaluate_loss"], abs=1e-3)


def test_predict_returns_exactly_33_outputs_in_dataset_order(
    sharded: tuple[Path, list[dict[str, Any]]], single: dict[str, Any]
) -> None:
    data = IndexedData(job.NUM_EVAL, seed=2)
    for rep in sharded[1]:
        preds = rep["predictions"]
        assert preds.shape == (job.NUM_EVAL, 3)
        model = make_model()
        model.load_state_dict(rep["weights"])
        with torch.no_grad():
            torch.testing.assert_close(preds, model(data.x), atol=1e-6, rtol=0)
        torch.testing.assert_close(preds, single["predictions"], atol=TOL, rtol=0)


def test_optimizer_created_before_sharding_is_refused(
    sharded: tuple[Path, list[dict[str, Any]]],
) -> None:
    message = sharded[1][0]["bad_optimizer"]
    assert "4 of the optimizer's 4 parameters (Parameter) are not the sharded model's" in message
    assert "model = shard_model(model); optimizer =" in message


def test_fsdp_checkpoint_loads_into_a_plain_model_and_optimizer(
    sharded: tuple[Path, list[dict[str, Any]]],
) -> None:
    out, reports = sharded
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=job.LR, momentum=0.9)
    plain = Trainer(model, nn.CrossEntropyLoss(), opt, callbacks=[])
    with pytest.warns(UserWarning, match="saved by 2 process\\(es\\) and is resumed by 1"):
        plain.load_checkpoint(out / "final.pt")
    for key, value in model.state_dict().items():
        assert torch.equal(value, reports[0]["weights"][key]), key
    # The momentum buffers came back too, keyed by position like a plain optimizer's.
    assert len(opt.state) == 4
    assert all(st["momentum_buffer"].shape == p.shape for p, st in opt.state.items())
    assert plain.state.global_step == job.STEPS


def test_resume_under_fsdp_matches_the_uninterrupted_run(
    sharded: tuple[Path, list[dict[str, Any]]], single: dict[str, Any], tmp_path: Path
) -> None:
    out, reports = sharded
    from_fsdp = out / "ckpt" / "ckpt-000002-step4.pt"
    from_plain = single["ckpt"] / "ckpt-000002-step4.pt"  # written by the 1-process run
    done, _ = torchrun("resume", str(tmp_path), str(from_fsdp), str(from_plain))
    assert done.returncode == 0, done.stderr[-4000:]
    for rank in (0, 1):
        own, plain = load(tmp_path, rank)["runs"]
        assert own["global_step"] == plain["global_step"] == job.STEPS
        # A sharded checkpoint resumed by the same sharded setup: bitwise equal.
        for key, value in reports[rank]["weights"].items():
            assert torch.equal(own["weights"][key], value), key
        assert own["history"] == reports[rank]["history"]
        # A single-process checkpoint resumed under FSDP: the same run, up to summation order.
        assert_close_weights(plain["weights"], reports[rank]["weights"], TOL)


def test_fp16_scaler_and_save_best_under_fsdp(tmp_path: Path) -> None:
    """fp16 + GradScaler on a sharded model: an inf in one rank's gradient shard skips the
    update on every rank (the other rank's shard is finite) and halves the same scale;
    SaveBestModelCallback writes a full checkpoint and reloads the best weights only."""
    done, _ = torchrun("fp16_best", str(_mkdir(tmp_path / "fsdp")))
    assert done.returncode == 0, done.stderr[-4000:]
    single = job.run_fp16_best(_mkdir(tmp_path / "single"))  # the same run in one process
    reports = [load(tmp_path / "fsdp", rank) for rank in (0, 1)]
    for report in reports:
        changed = [c for c, _ in report["updates"]]
        scales = [s for _, s in report["updates"]]
        assert len(changed) == 20 and changed.count(False) == 1
        assert not changed[job.POISON_STEP], "the poisoned update is skipped on every rank"
        assert scales[job.POISON_STEP - 1] == 2 * scales[job.POISON_STEP] == 65536.0
        assert report["updates"] == reports[0]["updates"] == single["updates"]
        assert len(report["eval_losses"]) == 4, "reloading the best keeps the whole history"
        assert report["eval_losses"] == pytest.approx(single["eval_losses"], abs=1e-3)
        assert_close_weights(single["final_weights"], report["final_weights"], 2e-3)
    # The best file holds the full (gathered) weights of the best epoch, which are also
    # the weights the run ended with, and it loads into a plain model.
    best_epoch = min(range(4), key=lambda e: reports[0]["eval_losses"][e])
    assert best_epoch < 3, "the test needs a best epoch before the last one"
    saved = torch.load(tmp_path / "fsdp" / "best.pt", weights_only=True)["state"]["model"]
    model = make_model()
    model.load_state_dict(saved)
    for key, value in reports[0]["final_weights"].items():
        assert torch.equal(saved[key], value), key


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def test_shard_model_is_a_no_op_in_one_process() -> None:
    model = make_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert shard_model(model) is model
    assert not is_sharded(model)
    assert type(model) is nn.Sequential
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key])
    with pytest.raises(TypeError, match="received str"):
        shard_model("model")  # type: ignore[arg-type]


def test_default_units_are_the_blocks_of_the_outermost_containers() -> None:
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Linear(4, 8)
            self.blocks = nn.ModuleList(
                [nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8)) for _ in range(3)]
            )
            self.head = nn.Linear(8, 2)

    net = Net()
    # The three blocks, not the layers inside them; embed and head go with the root.
    assert _default_units(net) == list(net.blocks)
    seq = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    assert _default_units(seq) == [seq[0], seq[2]]  # layers without parameters are skipped


@pytest.mark.parametrize(
    "attempts", [1, pytest.param(3, marks=pytest.mark.slow)], ids=["once", "three-times"]
)
def test_a_ddp_script_that_never_destroys_its_group_exits_cleanly(
    tmp_path: Path, attempts: int
) -> None:
    # The job trains with DDP and returns, leaving the trainer, its DDP model and the gloo
    # group alive; scramjet's exit hook releases the wrapper, then destroys the group (the
    # job's own exit handler, which runs after it, records what it found). An exit that
    # hangs or complains only some of the time shows in the slow, repeated run.
    for attempt in range(attempts):
        out = tmp_path / str(attempt)
        out.mkdir()
        done, elapsed = torchrun("ddp_exit", str(out))
        assert done.returncode == 0, done.stderr[-4000:]
        assert elapsed < 40, f"took {elapsed:.0f} s"
        assert "process group" not in done.stderr.lower(), done.stderr[-2000:]
        for rank in (0, 1):
            assert load(out, rank) == {"wrapped": "DistributedDataParallel", "step": 10}
            assert (out / f"exit{rank}.txt").read_text() == "False Sequential"


def test_wrap_model_is_an_overridable_hook() -> None:
    class Wrapper(nn.Module):
        def __init__(self, inner: nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.inner(x)

    class WrappingTrainer(Trainer):
        def wrap_model(self, model: nn.Module) -> nn.Module:
            return Wrapper(model)

    model = make_model()
    trainer = WrappingTrainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[]
    )
    trainer.train(IndexedData(16, seed=1), num_epochs=1, per_device_batch_size=8)
    assert isinstance(trainer.model, Wrapper) and trainer.unwrapped_model is model
    trainer.release_distributed_wrapper()
    assert trainer.model is model
    # One process, default hook: nothing to wrap.
    plain = Trainer(model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters()), callbacks=[])
    plain.train(IndexedData(16, seed=1), num_epochs=1, per_device_batch_size=8)
    assert plain.model is model
