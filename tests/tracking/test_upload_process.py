"""Uploads in a separate process: where they run, a killed child, the fallback."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
import torch
from s3_helpers import S3Server
from tracking_helpers import make_trainer, tiny_data

from scramjet.callbacks import TrainerCallback
from scramjet.tracking import Experiment, ProcessRunStorage, RunStorage
from scramjet.tracking.storage import is_manifest
from scramjet.tracking.upload_process import open_storage


def _upload_threads(before: set[threading.Thread]) -> list[str]:
    """Upload threads started since ``before`` was taken (earlier tests of this process may
    have left in-process upload threads of their own running)."""
    return [
        t.name
        for t in threading.enumerate()
        if t.name.startswith("scramjet-upload") and t not in before
    ]


def _wait_for_key(s3: S3Server, bucket: str, key: str, timeout: float = 20.0) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        keys = s3.list_keys(bucket)
        if key in keys:
            return keys
        time.sleep(0.1)
    raise AssertionError(f"{key} never appeared in {bucket}: {s3.list_keys(bucket)}")


def test_uploads_run_in_another_process(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    (tmp_path / "a.bin").write_bytes(os.urandom(3000))
    before = set(threading.enumerate())
    store = open_storage(tmp_path, f"s3://{bucket}/run")
    try:
        assert isinstance(store, ProcessRunStorage)
        assert store.pid is not None and store.pid != os.getpid() and store.alive
        store.upload("a.bin")  # returns at once; the child does the work
        keys = _wait_for_key(s3, bucket, "run/a.bin")
        assert keys["run/a.bin"] == 3000
        assert _upload_threads(before) == [], "no upload thread runs in the training process"
        report = store.finish(exclude=is_manifest)
        assert report.ok and report.files["a.bin"]["status"] == "verified"
        maps = Path(f"/proc/{store.pid}/maps").read_text()
        assert "libtorch" not in maps, "the upload process does not load torch"
        assert (
            report.files["a.bin"]["sha256"]
            == hashlib.sha256((tmp_path / "a.bin").read_bytes()).hexdigest()
        )
        assert store.verify("a.bin")["status"] == "verified"
    finally:
        store.close()
    assert not store.alive


class _Probe(TrainerCallback):
    """At the start of epoch 2: the metric files of epoch 1 reach S3 without upload threads
    in this process; optionally kills the upload process instead."""

    def __init__(self, s3: S3Server, bucket: str, exp: Experiment, kill: bool) -> None:
        self.s3, self.bucket, self.exp, self.kill = s3, bucket, exp, kill
        self.threads: list[str] | None = None
        self.before = set(threading.enumerate())
        self.step_times: list[float] = []
        self._t = 0.0

    def on_train_epoch_start(self, trainer, **kwargs) -> None:
        if trainer.state.epoch != 1:
            return
        store = self.exp._storage
        assert isinstance(store, ProcessRunStorage)
        if self.kill:
            assert store.pid is not None
            os.kill(store.pid, signal.SIGKILL)
            return
        _wait_for_key(self.s3, self.bucket, f"proj/{self.exp.run_dir.name}/metrics.csv")
        self.threads = _upload_threads(self.before)

    def on_train_step_start(self, trainer, **kwargs) -> None:
        self._t = time.perf_counter()

    def on_train_step_end(self, trainer, **kwargs) -> None:
        self.step_times.append(time.perf_counter() - self._t)


def test_experiment_uploads_from_child_process(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    exp = Experiment("proj", "child", root=tmp_path, storage=f"s3://{bucket}", sync_every_s=0)
    probe = _Probe(s3, bucket, exp, kill=False)
    make_trainer([exp, probe]).train(tiny_data(), 2, per_device_batch_size=32)
    assert probe.threads == []
    assert exp.upload_report is not None and exp.upload_report.ok
    local = {p.relative_to(exp.run_dir).as_posix() for p in exp.run_dir.rglob("*") if p.is_file()}
    assert {k.split("/", 2)[2] for k in s3.list_keys(bucket)} == local
    assert exp._storage is None, "the upload process is closed with the run"


def test_killed_upload_process_is_reported_not_waited_for(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    done = []
    exp = Experiment(
        "proj",
        "killed",
        root=tmp_path,
        storage=f"s3://{bucket}",
        sync_every_s=0,
        keep_last=3,
        on_complete=done.append,
    )
    probe = _Probe(s3, bucket, exp, kill=True)
    start = time.perf_counter()
    with pytest.warns(UserWarning, match=r"upload process ended unexpectedly \(killed by SIGKILL"):
        make_trainer([exp, probe]).train(tiny_data(), 3, per_device_batch_size=32)
    assert time.perf_counter() - start < 60, "nothing waited for the dead process"
    assert max(probe.step_times) < 1.0
    report = exp.upload_report
    assert report is not None and not report.ok and "SIGKILL" in report.error
    assert done == []
    run = exp.run_dir
    manifest = json.loads((run / "manifest.json").read_text())
    assert not manifest["ok"] and "SIGKILL" in manifest["error"]
    assert "metrics.csv" in manifest["failures"]
    assert all(i["status"].startswith("not checked") for i in manifest["files"].values())
    # Local files are intact: every epoch's metrics, loadable checkpoints and weights.
    for rel, info in manifest["files"].items():
        assert hashlib.sha256((run / rel).read_bytes()).hexdigest() == info["sha256"], rel
    assert len((run / "metrics.csv").read_text().strip().splitlines()) > 3
    ckpts = sorted((run / "checkpoints").glob("ckpt-*.pt"))
    assert len(ckpts) == 3, ckpts
    assert all("state" in torch.load(c, weights_only=False) for c in ckpts)
    assert (run / "model" / "model.pt").is_file()
    assert isinstance(torch.load(run / "model" / "model.pt", weights_only=True), dict)


def test_killed_child_direct_calls_return(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    (tmp_path / "a.txt").write_text("hello")
    store = ProcessRunStorage(tmp_path, f"s3://{bucket}")
    assert store.pid is not None
    os.kill(store.pid, signal.SIGKILL)
    start = time.perf_counter()
    store.wait()
    store.upload("a.txt")  # dropped, no error
    report = store.finish()
    store.close()
    assert time.perf_counter() - start < 10
    assert not report.ok and report.failures == ["a.txt"] and "SIGKILL" in report.error
    assert "(upload process)" in store.errors
    assert (tmp_path / "a.txt").read_text() == "hello"


def test_stalled_child_never_blocks_the_caller(tmp_path: Path) -> None:
    """A stopped upload process cannot read its pipe; upload() must still return at once
    (the messages below are ~10x the pipe's buffer) and the queue must drain afterwards."""
    src = tmp_path / "src"
    src.mkdir()
    names = [f"f{i:04d}-{'x' * 180}.txt" for i in range(3000)]
    for name in names[:50]:
        (src / name).write_text(name)
    store = ProcessRunStorage(src, f"file://{tmp_path / 'remote'}")
    assert store.pid is not None
    os.kill(store.pid, signal.SIGSTOP)
    try:
        caller = threading.Thread(target=lambda: [store.upload(n) for n in names + names])
        start = time.perf_counter()
        caller.start()
        caller.join(20)
        assert not caller.is_alive(), "upload() blocked on a stalled upload process"
        assert time.perf_counter() - start < 5
    finally:
        os.kill(store.pid, signal.SIGCONT)
    report = store.finish()
    store.close()
    assert report.ok, report.error
    for name in names[:50]:
        assert (tmp_path / "remote" / name).read_text() == name


def test_unpicklable_options_fall_back_to_threads(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("hello")
    options = {"unused_hook": lambda: None}  # fsspec's local filesystem ignores it
    with pytest.warns(RuntimeWarning, match="picklable") as caught:
        store = open_storage(src, f"file://{tmp_path / 'remote'}", options, process=True)
    assert len(caught) == 1
    try:
        assert isinstance(store, RunStorage)
        store.upload("a.txt")
        assert store.finish().ok
    finally:
        store.close()
    assert (tmp_path / "remote" / "a.txt").read_text() == "hello"


def test_engine_choice(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'remote'}"
    store = open_storage(tmp_path, url)
    assert isinstance(store, RunStorage), "file:// stays in process by default"
    store.close()
    store = open_storage(tmp_path, url, process=True)
    assert isinstance(store, ProcessRunStorage)
    store.close()
    with pytest.raises(ValueError, match="workers and max_attempts"):
        ProcessRunStorage(tmp_path, url, workers=0)
    with pytest.raises(TypeError, match="exclude must be picklable"):
        store = ProcessRunStorage(tmp_path, url)
        try:
            store.finish(exclude=lambda rel: False)
        finally:
            store.close()


def test_child_that_cannot_open_the_storage_falls_back(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="could not open"):
        ProcessRunStorage(tmp_path, "nosuchprotocol-xyz://bucket/run")
    with pytest.warns(RuntimeWarning, match="could not open"), pytest.raises(ValueError):
        open_storage(tmp_path, "nosuchprotocol-xyz://bucket/run")  # the same error, in process


_UNGUARDED_SCRIPT = """
import sys
from pathlib import Path
from scramjet.tracking.storage import is_manifest
from scramjet.tracking.upload_process import open_storage

src, remote, marker = (Path(a) for a in sys.argv[1:4])
with open(marker, "a") as fh:  # runs once per interpreter that executes this script
    fh.write("ran\\n")
store = open_storage(src, f"file://{remote}", process=True)
print(store.pid, flush=True)
store.upload("big.bin")
# no close(): the training process ends with the upload still queued or in flight
"""


def test_child_does_not_rerun_the_script_and_ends_with_its_parent(tmp_path: Path) -> None:
    import subprocess
    import sys

    src = tmp_path / "src"
    src.mkdir()
    payload = os.urandom(1 << 20)
    (src / "big.bin").write_bytes(payload)
    script = tmp_path / "train.py"  # no `if __name__ == "__main__":` guard
    script.write_text(_UNGUARDED_SCRIPT)
    marker, remote = tmp_path / "marker.txt", tmp_path / "remote"
    out = subprocess.run(
        [sys.executable, str(script), str(src), str(remote), str(marker)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    child = int(out.stdout.split()[0])
    assert marker.read_text() == "ran\n", "the upload process did not run the script again"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _running(child):
        time.sleep(0.1)
    assert not _running(child), "the upload process ends when the training process is gone"
    assert (remote / "big.bin").read_bytes() == payload, "what was queued was still sent"


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"
