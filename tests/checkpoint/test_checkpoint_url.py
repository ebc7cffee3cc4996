"""``trainer.save_checkpoint(url)`` / ``trainer.load_checkpoint(url)`` against a real S3
server (moto) on 127.0.0.1: one checkpoint file on object storage, written atomically
(a failed or killed upload leaves whatever was there before), read back for an exact
resume; ``file://`` URLs too; an unknown scheme is refused with a clear error.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.tracking.s3_helpers import S3Server, s3, s3_server  # noqa: F401  (fixtures)

from scramjet import Trainer
from scramjet.callbacks import CallbackError, TrainerCallback
from scramjet.checkpoint import CheckpointWriteError, read_checkpoint, write_checkpoint
from scramjet.checkpoint.remote import default_local_dir, write_remote_checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "resume"))
import resume_job as job


class SaveThenCrash(TrainerCallback):
    """Saves a single-file checkpoint at ``at_step`` (then fails, if ``crash``)."""

    def __init__(self, at_step: int | None = None, url: str = "", crash: bool = True) -> None:
        self.at_step, self.url, self.crash = at_step, url, crash

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.global_step != self.at_step:
            return
        trainer.save_checkpoint(self.url, checkpoint_kwargs={"note": "mid-epoch"})
        if self.crash:
            raise RuntimeError("simulated crash")


def finished(trainer: Trainer) -> list[dict[str, torch.Tensor]]:
    return [trainer.model.state_dict(), job.ema_weights(trainer)]


def assert_bitwise(got: list[dict[str, torch.Tensor]], want: list[dict[str, torch.Tensor]]) -> None:
    for a, b in zip(got, want, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]), key


def small_trainer(seed: int = 0) -> Trainer:
    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 2)
    return Trainer(model, torch.nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.1))


def test_save_checkpoint_to_s3_then_resume_bitwise_on_a_fresh_machine(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    reference, kwargs = job.build(None, num_workers=0)
    reference.train(**kwargs)

    bucket = s3.new_bucket()
    url = f"s3://{bucket}/run/state.pt"
    crashed, kwargs = job.build(None, num_workers=0, extra=(SaveThenCrash(10, url),))
    with pytest.raises(CallbackError, match="simulated crash"):
        crashed.train(**kwargs)
    keys = s3.list_keys(bucket)
    assert list(keys) == ["run/state.pt"]
    assert not (tmp_path / "s3:").exists()  # nothing written to a local folder named "s3:"
    assert not (default_local_dir(url) / "state.pt").exists()  # the staged copy is gone
    body = s3.client().get_object(Bucket=bucket, Key="run/state.pt")["Body"].read()
    (tmp_path / "downloaded.pt").write_bytes(body)
    assert read_checkpoint(tmp_path / "downloaded.pt")["step"] == 10  # complete and checked

    resumed, kwargs = job.build(None, num_workers=0)
    resumed.train(**kwargs, resume_from=url)
    assert_bitwise(finished(resumed), finished(reference))
    assert resumed.run_history.state_dict() == reference.run_history.state_dict()
    assert resumed.state.global_step == job.TOTAL_STEPS

    fresh, _ = job.build(None, num_workers=0)
    values = fresh.load_checkpoint(url)
    assert values["note"] == "mid-epoch" and fresh.state.global_step == 10
    assert fresh.state.batches_seen_in_epoch == 2 * (10 - job.STEPS_PER_EPOCH)


def test_an_object_replaced_from_another_machine_is_read_anew(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/last.pt"
    trainer = small_trainer()
    trainer.state.global_step = 1
    trainer.save_checkpoint(url)
    assert small_trainer(1).load_checkpoint(url) == {}  # leaves a local copy behind
    with torch.no_grad():
        trainer.model.weight.add_(1.0)  # same shapes: the new file has the same size
    trainer.state.global_step = 2
    trainer.save_checkpoint(tmp_path / "newer.pt")  # another machine replaces the object
    s3.client().put_object(Bucket=bucket, Key="last.pt", Body=(tmp_path / "newer.pt").read_bytes())
    other = small_trainer(2)
    other.load_checkpoint(url)
    assert other.state.global_step == 2
    assert torch.equal(other.model.weight, trainer.model.weight)


def test_a_failed_upload_leaves_the_previous_object_and_says_so(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/last.pt"
    write_remote_checkpoint(url, {"w": torch.zeros(3)}, step=1)
    before = s3.client().get_object(Bucket=bucket, Key="last.pt")["Body"].read()
    s3.stop()  # the store goes away
    try:
        with pytest.raises(CheckpointWriteError, match="upload failed") as failed:
            write_remote_checkpoint(
                url, {"w": torch.ones(3)}, step=2, local_dir=tmp_path, upload_attempts=1
            )
    finally:
        s3.start()
    message = str(failed.value)
    assert url in message and "unchanged" in message and str(tmp_path / "last.pt") in message
    assert failed.value.saved and read_checkpoint(tmp_path / "last.pt")["step"] == 2
    assert s3.client().get_object(Bucket=bucket, Key="last.pt")["Body"].read() == before

    missing = "s3://no-such-bucket-here/last.pt"  # refused (4xx): not tried again
    start = time.monotonic()
    with pytest.raises(CheckpointWriteError, match=r"s3://no-such-bucket-here/last\.pt"):
        write_remote_checkpoint(missing, {"w": torch.zeros(3)}, local_dir=tmp_path / "m")
    assert time.monotonic() - start < 3


@pytest.mark.slow  # ~10-15 s: the upload is retried with backoff before the error
def test_trainer_save_checkpoint_to_a_stopped_store_raises_and_keeps_the_object(
    s3: S3Server,  # noqa: F811
) -> None:
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/last.pt"
    trainer = small_trainer()
    trainer.save_checkpoint(url)
    before = s3.client().get_object(Bucket=bucket, Key="last.pt")["Body"].read()
    trainer.state.global_step = 5
    s3.stop()
    try:
        with pytest.raises(CheckpointWriteError, match="upload failed") as failed:
            trainer.save_checkpoint(url)
    finally:
        s3.start()
    assert failed.value.path is not None and str(failed.value.path) in str(failed.value)
    assert read_checkpoint(failed.value.path)["step"] == 5  # the complete file, kept locally
    failed.value.path.unlink()
    assert s3.client().get_object(Bucket=bucket, Key="last.pt")["Body"].read() == before


_WRITER = """
import sys, torch
from scramjet.checkpoint.remote import write_remote_checkpoint
print("ready", flush=True)
write_remote_checkpoint(sys.argv[1], {"w": torch.full((6_000_000,), 2.0)}, step=2,
                        local_dir=sys.argv[2])
print("done", flush=True)
"""


@pytest.mark.slow  # ~5 s: a child process that imports torch and uploads 24 MB twice
def test_killed_mid_upload_leaves_the_previous_object(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/last.pt"
    write_remote_checkpoint(url, {"w": torch.full((6_000_000,), 1.0)}, step=1)
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, url, str(tmp_path / "stage")],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        text=True,
    )
    staged = tmp_path / "stage" / "last.pt"
    deadline = time.monotonic() + 60
    while not staged.exists():  # renamed into place: its upload starts now
        assert child.poll() is None and time.monotonic() < deadline
        time.sleep(0.001)
    time.sleep(0.05)  # a 24 MB PUT to the local server takes longer than this
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL  # killed before it finished
    time.sleep(0.5)  # a request the server had fully received before the kill may land
    body = s3.client().get_object(Bucket=bucket, Key="last.pt")["Body"].read()
    (tmp_path / "now.pt").write_bytes(body)
    now = read_checkpoint(tmp_path / "now.pt")  # complete: passes its checksum
    assert now["step"] in (1, 2)
    assert torch.equal(now["state"]["w"], torch.full((6_000_000,), float(now["step"])))


def test_file_urls_are_written_in_place_atomically(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'store' / 'last.pt'}"
    trainer = small_trainer()
    trainer.state.global_step = 3
    trainer.save_checkpoint(url, checkpoint_kwargs={"note": "here"})
    assert (tmp_path / "store" / "last.pt").is_file()
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["last.pt"]
    other = small_trainer(1)
    assert other.load_checkpoint(url)["note"] == "here"
    assert other.state.global_step == 3 and torch.equal(other.model.weight, trainer.model.weight)


def test_unknown_schemes_and_urls_naming_no_file_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    trainer = small_trainer()
    for call in (trainer.save_checkpoint, trainer.load_checkpoint):
        with pytest.raises(ValueError, match=r"'sss://' in 'sss://bucket/x\.pt'.*s3://.*gs://"):
            call("sss://bucket/x.pt")
    for no_file in ("s3://bucket/", "s3://bucket"):
        with pytest.raises(ValueError, match=rf"names a file.*received '{no_file}'"):
            trainer.save_checkpoint(no_file)
    with pytest.raises(ValueError, match="write_remote_checkpoint"):
        write_checkpoint("s3://bucket/x.pt", {"w": torch.zeros(1)})
    assert list(tmp_path.iterdir()) == []  # no local folder named after a scheme
