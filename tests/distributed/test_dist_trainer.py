"""The Trainer in real 2-process runs (gloo on CPU) started by torchrun, `scramjet launch`
and ``scramjet.runtime.launch``, compared with a single-process run of the same job."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import dist_train_job as job
import pytest
import torch

from scramjet.runtime import launch

pytestmark = pytest.mark.distributed

JOB = str(Path(__file__).with_name("dist_train_job.py"))
RUN_LIMIT_S = 90  # a hang would hit this; the runs below take a few seconds each
TOL = 1e-5  # 2 ranks x batch 4 vs 1 process x batch 8: same maths, float summation order differs


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(cmd: list[str], **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **env}
    start = time.monotonic()
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=RUN_LIMIT_S, env=full_env, check=False
    )
    return done, time.monotonic() - start


def torchrun(*args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    return run([*cmd, "--master-port", str(free_port()), JOB, *args], **env)


def load(out: Path, rank: int) -> dict[str, Any]:
    return torch.load(out / f"rank{rank}.pt", weights_only=False)


def assert_close_weights(
    a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], tol: float
) -> None:
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=tol, rtol=0, msg=f"{key} differs")


@pytest.fixture(scope="module")
def single() -> dict[str, Any]:
    """The job in this one process, with the global batch."""
    trainer, steps = job.train_in_order(None)
    report = job.result(trainer, steps)
    report["predictions"] = trainer.predict(job.IndexedData(job.NUM_EVAL, seed=2), 4)
    return report


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("torchrun")
    done, _ = torchrun("full", str(out))
    assert done.returncode == 0, done.stderr[-4000:]
    return out, [load(out, 0), load(out, 1)]


def test_two_ranks_match_one_process_with_the_global_batch(
    two_ranks: tuple[Path, list[dict[str, Any]]], single: dict[str, Any]
) -> None:
    _, reports = two_ranks
    for rep in reports:
        assert rep["world"] == 2 and rep["wrapped"] == "DistributedDataParallel"
        # Each update applied once per process: 6 optimizer.step() calls, 6 global steps.
        assert rep["optimizer_steps"] == rep["global_step"] == job.STEPS == single["global_step"]
        # Gradients are all-reduced once per update (one bucket), not once per micro-batch
        # (10): accumulation micro-steps run under no_sync.
        assert rep["allreduces"] == job.STEPS
        assert_close_weights(rep["weights"], single["weights"], TOL)
        for name in ("train_loss_epoch", "eval_loss_epoch"):  # reduced over both ranks
            got, want = rep["history"]["metrics"][name], single["history"]["metrics"][name]
            assert got == pytest.approx(want, abs=TOL), name
    # DDP keeps the replicas identical, bit for bit.
    for key, value in reports[0]["weights"].items():
        assert torch.equal(value, reports[1]["weights"][key])


def test_predict_returns_every_sample_once_in_order(
    two_ranks: tuple[Path, list[dict[str, Any]]], single: dict[str, Any]
) -> None:
    _, reports = two_ranks
    data = job.IndexedData(job.NUM_EVAL, seed=2)
    for rep in reports:
        preds = rep["predictions"]
        assert preds.shape == (job.NUM_EVAL, 3)  # 33 samples on 2 ranks: 33 rows, no padding
        model = job.make_model()
        model.load_state_dict(rep["weights"])
        with torch.no_grad():
            torch.testing.assert_close(preds, model(data.x), atol=1e-6, rtol=0)
        torch.testing.assert_close(preds, single["predictions"], atol=TOL, rtol=0)
        # A DataLoader with a ShardSampler gives the same rows (its len() counts batches);
        # the Trainer's own loader splits one rank's last batch so that both ranks take
        # as many steps, so the rows agree to float rounding rather than bit for bit.
        torch.testing.assert_close(rep["loader_predictions"], preds, atol=1e-6, rtol=0)
        tiny, expected = rep["tiny_predict"]
        assert tiny.shape == (1, 3)
        torch.testing.assert_close(tiny, expected, atol=1e-6, rtol=0)


def test_each_rank_gets_its_own_share_reshuffled_every_epoch(
    two_ranks: tuple[Path, list[dict[str, Any]]],
) -> None:
    _, reports = two_ranks
    r0, r1 = reports[0]["shuffled"], reports[1]["shuffled"]
    assert sorted(r0) == sorted(r1) == [0, 1, 2]
    for epoch in r0:
        # No seed given: the ranks agree on rank 0's draw, so shares are disjoint and complete.
        assert sorted(r0[epoch] + r1[epoch]) == list(range(job.NUM_TRAIN))
    assert r0[0] != r0[1] != r0[2] and r1[0] != r1[1]
    assert r0[0] != sorted(r0[0])


def test_checkpoints_written_once_by_rank_zero_and_resumable(
    two_ranks: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    out, reports = two_ranks
    ckpt = out / "ckpt"
    names = sorted(p.name for p in ckpt.iterdir())
    # One file per save (every 2 steps), numbered 1, 2, 3: a second writer would add files
    # or collide on sequence numbers; no temporary files are left behind.
    assert names == [
        "ckpt-000001-step2.pt",
        "ckpt-000002-step4.pt",
        "ckpt-000003-step6.pt",
        "index.json",
    ]
    done, _ = torchrun("resume", str(tmp_path), str(ckpt / "ckpt-000002-step4.pt"))
    assert done.returncode == 0, done.stderr[-4000:]
    for rank in (0, 1):
        resumed = load(tmp_path, rank)
        assert resumed["global_step"] == job.STEPS
        assert resumed["optimizer_steps"] == job.STEPS - 4  # only the steps after the checkpoint
        for key, value in reports[rank]["weights"].items():
            assert torch.equal(resumed["weights"][key], value), key
        assert resumed["history"] == reports[rank]["history"]


def test_a_rank_that_raises_ends_the_run_with_its_error(tmp_path: Path) -> None:
    done, elapsed = torchrun("raise", str(tmp_path), SCRAMJET_DIST_TIMEOUT="30")
    assert done.returncode != 0
    assert "ValueError: rank 1 failed on purpose at step 2" in done.stderr
    assert elapsed < 30 + 15  # ended by the launcher (or at worst the timeout), not a hang
    assert not (tmp_path / "rank0.pt").exists()


def test_a_stuck_rank_ends_the_run_at_the_timeout(tmp_path: Path) -> None:
    # Rank 1 stalls for 120 s at step 2; rank 0's next gradient all-reduce gives up after
    # SCRAMJET_DIST_TIMEOUT seconds and the launcher then stops rank 1.
    done, elapsed = torchrun("hang", str(tmp_path), SCRAMJET_DIST_TIMEOUT="4")
    assert done.returncode != 0
    assert elapsed < 45, f"took {elapsed:.0f} s"
    assert "Timed out waiting 4000ms" in done.stderr, done.stderr[-3000:]
    assert not (tmp_path / "rank0.pt").exists()


@pytest.mark.slow  # the default run covers the command: tests/runtime/test_runtime_distributed.py
def test_scramjet_launch_runs_the_same_job(
    two_ranks: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    cmd = [sys.executable, "-m", "scramjet.cli", "launch", "--nproc-per-node", "2"]
    done, _ = run([*cmd, JOB, "full", str(tmp_path)])
    assert done.returncode == 0, done.stderr[-4000:]
    for rank in (0, 1):
        got, want = load(tmp_path, rank), two_ranks[1][rank]
        for key, value in want["weights"].items():
            assert torch.equal(got["weights"][key], value), key
        assert torch.equal(got["predictions"], want["predictions"])


@pytest.mark.slow  # the default run covers launch(): tests/runtime/test_runtime_distributed.py
def test_runtime_launch_runs_the_same_job(
    two_ranks: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    assert launch(job.launched, nprocs=2, args=("full", str(tmp_path))) == job.STEPS
    got = load(tmp_path, 1)
    for key, value in two_ranks[1][1]["weights"].items():
        assert torch.equal(got["weights"][key], value), key


def test_a_checkpoint_write_that_fails_on_rank_zero_leaves_no_rank_waiting(
    tmp_path: Path,
) -> None:
    # Rank 0's manager raises inside the save; the save's barrier must still be passed, or
    # rank 1 pairs the wrong collectives and waits out the timeout. The timeout is far
    # above the job's own time (15 s on a loaded 2-core machine), so only a wait reaches it.
    job_file = str(Path(__file__).with_name("save_failure_job.py"))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    done, elapsed = run(
        [*cmd, "--master-port", str(free_port()), job_file, str(tmp_path)],
        SCRAMJET_DIST_TIMEOUT="60",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r0["result"] == "raised [Errno 28] No space left on device", r0
    assert r1["result"] == "returned", r1
    assert elapsed < 60, f"took {elapsed:.0f} s"  # no rank waited out the timeout
