"""Checkpoints on object storage, against a real S3 server (moto) on 127.0.0.1.

``SaveTrainingStateCallback("s3://...")`` writes each checkpoint locally (background
writer) and uploads it; ``resume_from="s3://..."`` or ``"auto"`` downloads the newest good
one, on a machine that has no local copy. A failed upload keeps the local file; a
process killed in the middle of an upload never leaves a damaged newest checkpoint.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.tracking.s3_helpers import S3Server, s3, s3_server  # noqa: F401  (fixtures)

from scramjet.callbacks import SaveTrainingStateCallback, TrainerCallback
from scramjet.checkpoint import CheckpointWriteError, read_checkpoint
from scramjet.checkpoint.remote import RemoteCheckpointManager, default_local_dir, load_remote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "resume"))
import resume_job as job

pytestmark = pytest.mark.filterwarnings("ignore:.*could not prepare.*")


class CrashAt(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.at = step

    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.global_step == self.at:
            raise RuntimeError("crashed on purpose")


class StartedAt(TrainerCallback):
    step = -1

    def on_training_run_start(self, trainer: Any, **kwargs: Any) -> None:
        self.step = trainer.state.global_step


def ckpt_keys(server: S3Server, bucket: str) -> list[str]:
    return sorted(k.rsplit("/", 1)[-1] for k in server.list_keys(bucket) if "/ckpt-" in k)


def final(trainer: Any) -> list[dict[str, torch.Tensor]]:
    return [trainer.model.state_dict(), job.ema_weights(trainer)]


def assert_bitwise(got: list[dict[str, torch.Tensor]], want: list[dict[str, torch.Tensor]]) -> None:
    for a, b in zip(got, want, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]), key


def test_s3_checkpoints_resume_auto_on_a_fresh_machine_bitwise(s3: S3Server) -> None:  # noqa: F811
    reference, kwargs = job.build(None, num_workers=0)
    reference.train(**kwargs)

    bucket = s3.new_bucket()
    url = f"s3://{bucket}/run/ckpt"
    trainer, kwargs = job.build(url, num_workers=0, extra=(CrashAt(11),))
    with pytest.raises(RuntimeError, match="crashed on purpose"):
        trainer.train(**kwargs, resume_from="auto")
    # Saved at steps 3, 6, 7 (epoch end), 9; keep_last=2 rotates the remote folder too.
    assert ckpt_keys(s3, bucket) == ["ckpt-000003-step7.pt", "ckpt-000004-step9.pt"]
    shutil.rmtree(default_local_dir(url))  # a new machine: no local copy at all

    started = StartedAt()
    resumed, kwargs = job.build(url, num_workers=0, extra=(started,))
    resumed.train(**kwargs, resume_from="auto")
    assert started.step == 9
    assert_bitwise(final(resumed), final(reference))
    assert resumed.run_history.state_dict() == reference.run_history.state_dict()
    # Numbering went on after the remote files: never a reused name.
    seqs = [int(name.split("-")[1]) for name in ckpt_keys(s3, bucket)]
    assert seqs == sorted(seqs) and min(seqs) > 4
    shutil.rmtree(default_local_dir(url))


def test_a_damaged_newest_object_is_skipped(s3: S3Server, tmp_path: Path) -> None:  # noqa: F811
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/ckpt"
    with RemoteCheckpointManager(url, tmp_path / "a", keep_last=None) as manager:
        for step in (1, 2):
            manager.save({"w": torch.full((4,), float(step))}, step=step)
    newest = f"ckpt/{ckpt_keys(s3, bucket)[-1]}"
    body = s3.client().get_object(Bucket=bucket, Key=newest)["Body"].read()
    s3.client().put_object(Bucket=bucket, Key=newest, Body=body[: len(body) // 2])  # truncated
    with pytest.warns(UserWarning, match="trying the previous checkpoint"):
        result = load_remote(url, {}, local_dir=tmp_path / "b")
    assert result.step == 1 and torch.equal(result.values["w"], torch.full((4,), 1.0))


def test_upload_failure_keeps_the_local_copy(s3: S3Server, tmp_path: Path) -> None:  # noqa: F811
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/ckpt"
    manager = RemoteCheckpointManager(url, tmp_path, keep_last=1, upload_attempts=1)
    manager.save({"w": torch.zeros(3)}, step=1)
    manager.wait()
    s3.stop()  # the store goes away
    try:
        with pytest.warns(RuntimeWarning, match="not uploaded"):
            for step in (2, 3):
                manager.save({"w": torch.full((3,), float(step))}, step=step)
                manager.wait()
        local = sorted(p.name for p in tmp_path.glob("ckpt-*.pt"))
        # keep_last=1 would keep only step 3; the files not uploaded stay.
        assert local == ["ckpt-000002-step2.pt", "ckpt-000003-step3.pt"]
        with pytest.raises(CheckpointWriteError, match="could not be uploaded") as failed:
            manager.close()
        assert failed.value.saved
    finally:
        s3.start()
    manager.close()  # the store is back: the uploads go through
    assert ckpt_keys(s3, bucket) == ["ckpt-000003-step3.pt"]  # keep_last=1 remotely
    manager.save({"w": torch.ones(3)}, step=4)
    manager.close()
    assert sorted(p.name for p in tmp_path.glob("ckpt-*.pt")) == ["ckpt-000004-step4.pt"]


_WRITER = """
import sys, torch
from scramjet.checkpoint.remote import RemoteCheckpointManager
manager = RemoteCheckpointManager(sys.argv[1], sys.argv[2], keep_last=None)
for step in (1, 2):
    manager.save({"w": torch.full((6_000_000,), float(step))}, step=step)
    manager.wait()
    print(step, flush=True)
"""


def test_killed_mid_upload_never_leaves_a_damaged_latest(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/ckpt"
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, url, str(tmp_path / "local")],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        text=True,
    )
    second = tmp_path / "local" / "ckpt-000002-step2.pt"
    deadline = time.monotonic() + 60
    while not second.exists():  # renamed into place: its upload starts now
        assert child.poll() is None and time.monotonic() < deadline
        time.sleep(0.001)
    time.sleep(0.1)  # a 24 MB PUT to the local server takes longer than this
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    keys = ckpt_keys(s3, bucket)
    while True:  # a request the server had fully received before the kill may still land
        time.sleep(0.5)
        settled = ckpt_keys(s3, bucket)
        if settled == keys:
            break
        keys = settled
    assert keys[:1] == ["ckpt-000001-step1.pt"]
    for name in keys:  # whatever is on the store is complete
        s3.client().download_file(bucket, f"ckpt/{name}", str(tmp_path / name))
        read_checkpoint(tmp_path / name)
    result = load_remote(url, {}, local_dir=tmp_path / "fresh")
    assert result.step == len(keys)
    assert torch.equal(result.values["w"], torch.full((6_000_000,), float(len(keys))))


def test_a_url_callback_keeps_its_copies_in_local_dir(tmp_path: Path) -> None:
    callback = SaveTrainingStateCallback("s3://bucket/x", local_dir=tmp_path)
    assert callback.url == "s3://bucket/x" and callback.directory == tmp_path


@pytest.mark.slow  # ~40 s: two 2-process runs under scramjet launch
@pytest.mark.distributed
def test_elastic_restart_resumes_from_s3(s3: S3Server, tmp_path: Path) -> None:  # noqa: F811
    """2 gloo ranks checkpoint to S3; rank 1 is killed, the agent restarts the group,
    which resumes from the store; bitwise equal to the same run without the failure."""
    from tests.distributed.test_elastic import JOB, STEPS, env, launch_cmd, results

    def launch_job(out: Path, url: str, *extra: str) -> None:
        cmd = launch_cmd("--nproc-per-node", "2", "--max-restarts", "1", JOB, str(out), url)
        done = subprocess.run(
            [*cmd, *extra], capture_output=True, text=True, env=env(), timeout=150
        )
        assert done.returncode == 0, done.stderr[-4000:]

    bucket = s3.new_bucket()
    reference, interrupted = f"s3://{bucket}/ref", f"s3://{bucket}/run"
    launch_job(tmp_path / "ref", reference)
    launch_job(tmp_path / "run", interrupted, "--kill-rank-at", "9")
    assert (tmp_path / "run" / "killed").exists()
    want, got = results(tmp_path / "ref"), results(tmp_path / "run")
    assert 0 < got[0]["started_at"] <= 9 and got[0]["step"] == STEPS
    for rank in (0, 1):
        for key, value in want[0]["weights"].items():
            assert torch.equal(got[rank]["weights"][key], value), key
    assert ckpt_keys(s3, bucket)  # the checkpoints went to the store
    for url in (reference, interrupted):
        shutil.rmtree(default_local_dir(url), ignore_errors=True)


def test_has_checkpoints_closes_the_folder_listing(tmp_path: Path) -> None:
    import gc
    import warnings

    from scramjet.checkpoint.remote import has_checkpoints

    for name in ("ckpt-000001-step1.pt", "ckpt-000002-step2.pt"):
        (tmp_path / name).write_bytes(b"")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert has_checkpoints(tmp_path)
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
