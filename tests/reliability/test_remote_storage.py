"""Remote storage never hangs training, and the upload process never outlives its parent.

Each test reproduces a failure seen before the storage calls had bounds: an S3 endpoint
that accepts connections but never answers kept ``train()`` from returning for ~580 s
after the last epoch, a dead endpoint for ~338 s; a missing bucket or wrong credentials
was retried for ~70 s; the upload process outlived a killed training process by
minutes. The endpoints are real sockets on 127.0.0.1 (moto's S3 server, a server that
accepts and never answers, a port with nothing listening, a server that refuses every
request with an S3 error document), never a mocked client.
"""

from __future__ import annotations

import http.server
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.tracking.s3_helpers import S3Server, free_port
from torch.utils.data import TensorDataset

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback
from scramjet.tracking import Experiment, RunStorage
from scramjet.tracking.storage import StorageTimeouts, permanent_error
from scramjet.tracking.upload_process import _REPLY_MARGIN_S

# Short bounds so the default suite stays fast; the defaults are measured by the slow test.
FAST = StorageTimeouts(connect=0.5, read=1.0, call=2.0, final=4.0)


def bound(t: StorageTimeouts) -> float:
    """The documented bound on train() after the last epoch: final + call + 5 s."""
    return t.final + t.call + _REPLY_MARGIN_S


# ----------------------------------------------------------------- endpoints
class FrozenServer:
    """Accepts TCP connections on 127.0.0.1 and never reads or answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.endpoint = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.conns: list[socket.socket] = []
        self._stop = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.conns.append(conn)  # held open, never read: the client waits forever

    def close(self) -> None:
        self._stop = True
        self._thread.join(2)
        for conn in self.conns:
            conn.close()
        self.sock.close()


class RefusingServer(http.server.ThreadingHTTPServer):
    """Answers every request with one S3 error document and HTTP status."""

    def __init__(self, status: int, code: str) -> None:
        self.requests = 0
        body = (
            f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code>"
            f"<Message>refused by the test server</Message></Error>"
        ).encode()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _refuse(self) -> None:
                server.requests += 1
                if "Expect" not in self.headers:  # else the body waits for "100 Continue"
                    self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _refuse

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.shutdown()
        self.server_close()


def _aws_env(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture()
def endpoint(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``frozen``: accepts and never answers; ``dead``: nothing listens on the port."""
    if request.param == "frozen":
        server = FrozenServer()
        _aws_env(monkeypatch, server.endpoint)
        yield server.endpoint
        server.close()
    else:
        url = f"http://127.0.0.1:{free_port()}"
        _aws_env(monkeypatch, url)
        yield url


# ----------------------------------------------------------------- training
def _data(n: int = 64) -> TensorDataset:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, 6, generator=gen)
    return TensorDataset(x, (x[:, 0] > 0).long())


class _LastEpoch(TrainerCallback):
    """Records when the last epoch's handlers (the Experiment's included) are done."""

    def __init__(self) -> None:
        self.at = 0.0

    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.at = time.perf_counter()


def _train(exp: Experiment, epochs: int = 2) -> float:
    """Seconds from the end of the last epoch to ``train()`` returning."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    probe = _LastEpoch()
    trainer = Trainer(
        model,
        torch.nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[exp, probe],
        seed=0,
    )
    with pytest.warns(UserWarning, match="failed"):
        trainer.train(_data(), epochs, per_device_batch_size=16)
    return time.perf_counter() - probe.at


def _local_snapshot(run: Path) -> dict[str, bytes]:
    return {
        p.relative_to(run).as_posix(): p.read_bytes()
        for p in sorted(run.rglob("*"))
        if p.is_file() and p.name not in ("manifest.json", "run.json")
    }


@pytest.mark.serial  # a wall-clock bound: run alone, not beside other tests
@pytest.mark.parametrize(
    ("endpoint", "process"),
    [("frozen", True), ("dead", True), ("frozen", False)],
    ids=["frozen-upload-process", "dead-upload-process", "frozen-threads"],
    indirect=["endpoint"],
)
def test_train_returns_in_bounded_time_whatever_the_endpoint(
    endpoint: str, process: bool, tmp_path: Path
) -> None:
    exp = Experiment(
        "proj",
        "run",
        root=tmp_path,
        storage="s3://bucket/team",
        upload_process=process,
        upload_timeouts=FAST,
        sync_every_s=0,
        save_script=False,
        on_storage_error="continue",  # no check at the start: the bound of the final sync
    )
    after_last_epoch = _train(exp)
    print(f"\n{endpoint}: train() returned {after_last_epoch:.2f} s after the last epoch")
    assert after_last_epoch <= bound(FAST), after_last_epoch
    report = exp.upload_report
    assert report is not None and not report.ok and report.failures
    assert (exp.run_dir / "model").exists() and (exp.run_dir / "report.html").exists()


@pytest.mark.slow
@pytest.mark.parametrize("endpoint", ["frozen", "dead"], indirect=True)
def test_bound_with_default_timeouts(endpoint: str, tmp_path: Path) -> None:
    exp = Experiment(
        "proj",
        "run",
        root=tmp_path,
        storage="s3://bucket/team",
        sync_every_s=0,
        on_storage_error="continue",
    )
    after_last_epoch = _train(exp)
    print(f"\n{endpoint}, defaults: train() returned {after_last_epoch:.2f} s after the last epoch")
    assert after_last_epoch <= bound(StorageTimeouts()) <= 60


@pytest.mark.serial  # a wall-clock bound: run alone, not beside other tests
def test_generic_filesystem_calls_have_a_deadline(tmp_path: Path) -> None:
    """fsspec's HTTP filesystem has no timeout of its own that we set: the per-call
    deadline bounds its calls against a server that never answers."""
    server = FrozenServer()
    try:
        (tmp_path / "a.bin").write_bytes(os.urandom(1000))
        start = time.perf_counter()
        store = RunStorage(tmp_path, f"{server.endpoint}/run", timeouts=FAST)
        store.upload("a.bin")
        report = store.finish()
        store.close()
        took = time.perf_counter() - start
    finally:
        server.close()
    assert not report.ok and report.failures == ["a.bin"]
    assert took <= FAST.final + FAST.call + 1, took


# ----------------------------------------------------------------- permanent errors
@pytest.fixture(scope="module")
def s3_server() -> Iterator[S3Server]:
    server = S3Server()
    server.start()
    yield server
    server.stop()


@pytest.mark.serial  # a wall-clock bound: run alone, not beside other tests
def test_missing_bucket_fails_fast_with_a_fix(
    s3_server: S3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _aws_env(monkeypatch, s3_server.endpoint)
    exp = Experiment(
        "proj",
        "run",
        root=tmp_path,
        storage="s3://no-such-bucket-here/team",
        upload_timeouts=StorageTimeouts(),  # the defaults: fast because nothing is retried
        sync_every_s=0,
        save_script=False,
        on_storage_error="continue",  # the refusal during the run (the default stops at start)
    )
    start = time.perf_counter()
    after_last_epoch = _train(exp)
    took = time.perf_counter() - start
    print(f"\nmissing bucket: train() {took:.2f} s, {after_last_epoch:.2f} s after the last epoch")
    report = exp.upload_report
    assert report is not None and not report.ok
    assert "HTTP 404" in report.error and "NoSuchBucket" in report.error, report.error
    assert "create the bucket" in report.error and "no-such-bucket-here" in report.error
    # one try per upload thread (two, at the same moment), then nothing more
    assert report.failed_attempts <= 2, "a permanent refusal is not retried"
    assert after_last_epoch < 5, after_last_epoch
    assert _local_snapshot(exp.run_dir), "local files stay"
    assert "HTTP 404" in (exp.run_dir / "manifest.json").read_text()


@pytest.mark.parametrize(
    ("status", "code", "permanent"),
    [
        (403, "InvalidAccessKeyId", True),
        (403, "AccessDenied", True),
        (400, "InvalidArgument", True),
        (503, "SlowDown", False),
        (429, "TooManyRequests", False),
    ],
)
def test_only_permanent_refusals_skip_the_retries(
    status: int, code: str, permanent: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    server = RefusingServer(status, code)
    _aws_env(monkeypatch, server.endpoint)
    payload = os.urandom(2000)
    (tmp_path / "a.bin").write_bytes(payload)
    try:
        store = RunStorage(tmp_path, "s3://bucket/run", max_attempts=3, backoff=0.05, timeouts=FAST)
        store.upload("a.bin")
        report = store.finish(rounds=1)
        store.close()
    finally:
        server.close()
    assert not report.ok
    assert (tmp_path / "a.bin").read_bytes() == payload, "an upload failure never touches local"
    if permanent:
        assert store.failed_attempts == 1
        assert f"HTTP {status} {code}" in report.error and "check the credentials" in report.error
    else:
        assert store.failed_attempts >= 2, "transient errors are retried"
        assert report.error == ""


def test_permanent_error_classification() -> None:
    class Answer(Exception):
        def __init__(self, status: int, code: str) -> None:
            super().__init__(code)
            self.response = {
                "ResponseMetadata": {"HTTPStatusCode": status},
                "Error": {"Code": code},
            }

    def wrapped(inner: BaseException) -> OSError:
        try:
            raise OSError("translated") from inner
        except OSError as exc:
            return exc

    assert permanent_error(wrapped(Answer(404, "NoSuchBucket"))) == "HTTP 404 NoSuchBucket"
    assert permanent_error(Answer(403, "SignatureDoesNotMatch")) is not None
    for transient in (408, 429, 500, 503):
        assert permanent_error(wrapped(Answer(transient, "x"))) is None

    class GcsAnswer(Exception):  # gcsfs's HttpError carries the status as ``code``
        code = 403

    assert permanent_error(GcsAnswer()) == "HTTP 403"
    assert permanent_error(TimeoutError("slow")) is None
    assert permanent_error(ConnectionRefusedError()) is None
    assert permanent_error(PermissionError("denied")) == "permission denied"


# ----------------------------------------------------------------- the upload process
_TRAINER_SCRIPT = """
import sys, time, torch
from scramjet import Trainer
from scramjet.callbacks import TrainerCallback
from scramjet.tracking import Experiment
from scramjet.tracking.storage import StorageTimeouts

class Hang(TrainerCallback):
    def on_train_epoch_end(self, trainer, **kwargs):
        print(exp._storage.pid, flush=True)
        time.sleep(600)  # the training process is killed here, with uploads in flight

exp = Experiment("proj", "run", root=sys.argv[1], storage="s3://bucket/team",
                 upload_process=True, sync_every_s=0, save_script=False,
                 on_storage_error="continue",
                 upload_timeouts=StorageTimeouts(final=300, call=300, read=300))
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
x = torch.randn(32, 4)
Trainer(model, torch.nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[exp, Hang()]).train(
    torch.utils.data.TensorDataset(x, (x[:, 0] > 0).long()), 1, per_device_batch_size=8)
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_upload_process_dies_with_a_killed_trainer(tmp_path: Path) -> None:
    server = FrozenServer()  # the child is stuck in uploads that never finish
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": server.endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    script = tmp_path / "train.py"
    script.write_text(_TRAINER_SCRIPT)
    trainer = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "runs")],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    try:
        assert trainer.stdout is not None
        child = int(trainer.stdout.readline())
        deadline = time.monotonic() + 10
        while not server.conns and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _running(child) and server.conns, "the child is uploading to the frozen server"
        killed = time.perf_counter()
        os.kill(trainer.pid, signal.SIGKILL)
        trainer.wait(10)
        while time.perf_counter() - killed < 10 and _running(child):
            time.sleep(0.05)
        gone_after = time.perf_counter() - killed
        print(f"\nupload process gone {gone_after:.2f} s after the trainer was killed")
        assert not _running(child), "the upload process outlived the killed trainer"
        assert gone_after < 3
        assert (tmp_path / "runs" / "proj").exists()
    finally:
        if trainer.poll() is None:
            trainer.kill()
        server.close()
