from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path

import pytest
from s3_helpers import S3Server
from tracking_helpers import make_trainer, tiny_data

from scramjet.callbacks import TrainerCallback
from scramjet.tracking import Experiment, RunStorage


def _local_files(run: Path) -> dict[str, str]:
    return {
        p.relative_to(run).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run.rglob("*"))
        if p.is_file()
    }


def test_local_fsspec_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.bin").write_bytes(b"a" * 5000)
    (src / "sub" / "b.txt").write_text("hello")
    store = RunStorage(src, f"file://{tmp_path / 'remote'}")
    store.upload("a.bin")
    report = store.finish()  # b.txt was never queued: the final sync sends it
    store.close()
    assert report.ok and set(report.files) == {"a.bin", "sub/b.txt"}
    assert (tmp_path / "remote" / "sub" / "b.txt").read_text() == "hello"


def test_s3_round_trip_with_manifest_and_on_complete(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    done = []
    exp = Experiment(
        "proj",
        "s3run",
        root=tmp_path,
        storage=f"s3://{bucket}/team",
        on_complete=done.append,
        log_every_n_steps=2,
    )
    make_trainer([exp]).train(
        tiny_data(), 2, eval_dataset=tiny_data(30, 1), per_device_batch_size=16
    )
    run = exp.run_dir
    local = _local_files(run)
    keys = s3.list_keys(bucket)
    prefix = f"team/proj/{run.name}/"
    assert {k[len(prefix) :] for k in keys} == set(local)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["ok"] and manifest["failures"] == []
    assert {rel: info["sha256"] for rel, info in manifest["files"].items()} == {
        rel: h for rel, h in local.items() if rel != "manifest.json"
    }
    body = s3.client().get_object(Bucket=bucket, Key=prefix + "metrics.csv")["Body"].read()
    assert body == (run / "metrics.csv").read_bytes()
    assert len(done) == 1 and done[0].ok


class _Outage(TrainerCallback):
    """Stops the S3 server at the start of epoch 2 and restarts it 4 s later."""

    def __init__(self, server: S3Server) -> None:
        self.server = server
        self.step_times: list[float] = []
        self._t = 0.0
        self.exp: Experiment | None = None
        self.engines: set[str] = set()

    def on_train_epoch_start(self, trainer, **kwargs) -> None:
        if self.exp is not None:
            self.engines.add(type(self.exp._storage).__name__)
        if trainer.state.epoch == 1:
            self.server.stop()
            threading.Timer(4.0, self.server.start).start()

    def on_train_step_start(self, trainer, **kwargs) -> None:
        self._t = time.perf_counter()

    def on_train_step_end(self, trainer, **kwargs) -> None:
        self.step_times.append(time.perf_counter() - self._t)


def test_s3_outage_mid_run_loses_nothing(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    outage = _Outage(s3)
    # botocore's own retries are turned down so the outage reaches our retry loop
    options = {"config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 1}}
    exp = Experiment(
        "proj",
        "outage",
        root=tmp_path,
        storage=f"s3://{bucket}",
        log_every_n_steps=3,
        keep_last=2,
        storage_options=options,
        upload_attempts=30,
        sync_every_s=0,  # mirror every epoch, so uploads run into the outage mid-run
    )
    outage.exp = exp
    start = time.perf_counter()
    make_trainer([outage, exp]).train(
        tiny_data(), 5, eval_dataset=tiny_data(30, 1), per_device_batch_size=16
    )
    assert time.perf_counter() - start < 120
    run = exp.run_dir
    local = _local_files(run)
    keys = s3.list_keys(bucket)
    assert {k.split("/", 2)[2] for k in keys} == set(local)
    assert exp.upload_report is not None and exp.upload_report.ok
    assert exp.upload_report.failed_attempts > 0, "the outage really made uploads fail"
    for rel, digest in local.items():
        remote = s3.client().get_object(Bucket=bucket, Key=f"proj/{run.name}/{rel}")["Body"].read()
        assert hashlib.sha256(remote).hexdigest() == digest, rel
    assert max(outage.step_times) < 1.0, "no step waited on the network"
    assert outage.engines == {"ProcessRunStorage"}, "uploads ran in the upload process"


def test_failed_upload_is_reported_and_local_files_stay(s3: S3Server, tmp_path: Path) -> None:
    done = []
    exp = Experiment(
        "proj",
        "fail",
        root=tmp_path,
        storage="s3://no-such-bucket-xyz",
        on_complete=done.append,
        upload_attempts=1,
        on_storage_error="continue",  # found during the run (the default stops at the start)
    )
    with pytest.warns(UserWarning, match="failed"):
        make_trainer([exp]).train(tiny_data(), 1, per_device_batch_size=32)
    assert s3.list_keys(s3.new_bucket()) == {}
    run = exp.run_dir
    manifest = json.loads((run / "manifest.json").read_text())
    assert not manifest["ok"] and "metrics.csv" in manifest["failures"]
    assert done == [], "on_complete never runs after a failed upload"
    assert (run / "model" / "model.pt").is_file() and (run / "report.html").is_file()
