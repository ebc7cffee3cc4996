"""A user who runs many experiments: sweeps in one process, parallel processes sharing a
root, notebooks calling ``train()`` again, ``resume="latest"`` among several experiments."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tracking_helpers import make_trainer, tiny_data

from scramjet import Trainer, seed_everything
from scramjet.callbacks import CallbackError, TrainerCallback
from scramjet.tracking import Experiment
from scramjet.tracking.storage import StorageTimeouts


def _train(exp: Experiment, epochs: int = 1) -> None:
    make_trainer([exp]).train(tiny_data(32), num_epochs=epochs, per_device_batch_size=16)


def test_resume_latest_ignores_runs_of_an_experiment_whose_name_extends_its_own(
    tmp_path: Path,
) -> None:
    mlp = Experiment("sweep", "mlp", root=tmp_path, save_script=False)
    _train(mlp)
    big = Experiment("sweep", "mlp_big", root=tmp_path, save_script=False)
    _train(big)

    again = Experiment("sweep", "mlp", root=tmp_path, resume="latest", save_script=False)
    _train(again, epochs=2)

    assert again.run_dir == mlp.run_dir
    big_info = json.loads((big.run_dir / "run.json").read_text())
    assert "resumed" not in big_info and big_info["experiment"] == "mlp_big"


class _FailAt(TrainerCallback):
    """Raises ``error`` in the named event: a user's callback with a bug, or Ctrl-C."""

    def __init__(self, event: str, error: BaseException) -> None:
        self.event, self.error = event, error

    def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        if self.event == "start":
            raise self.error

    def on_training_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if self.event == "end":
            raise self.error


def _tracking_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "scramjet-tracking"]


def test_a_callback_failing_at_training_start_ends_the_run_as_failed(tmp_path: Path) -> None:
    before = _tracking_threads()
    exp = Experiment("sweep", "lin", root=tmp_path, save_script=False)
    trainer = make_trainer([exp, _FailAt("start", ValueError("bad config"))])
    with pytest.raises(CallbackError, match="bad config"):
        trainer.train(tiny_data(32), num_epochs=1, per_device_batch_size=16)

    info = json.loads((exp.run_dir / "run.json").read_text())
    assert info["status"] == "failed" and "bad config" in info["error"]
    assert not trainer.in_training_run
    assert _tracking_threads() == before  # the Experiment's writer thread was stopped


def test_ctrl_c_at_the_end_of_training_ends_the_run_as_interrupted(tmp_path: Path) -> None:
    before = _tracking_threads()
    exp = Experiment("sweep", "lin", root=tmp_path, save_script=False)
    # Registered first, so the Ctrl-C comes before the Experiment's own end of the run.
    trainer = make_trainer([_FailAt("end", KeyboardInterrupt()), exp])
    with pytest.raises(KeyboardInterrupt):
        trainer.train(tiny_data(32), num_epochs=1, per_device_batch_size=16)

    assert json.loads((exp.run_dir / "run.json").read_text())["status"] == "interrupted"
    assert _tracking_threads() == before
    # The next run of the sweep, in the same process, works and is finished.
    after = Experiment("sweep", "lin", root=tmp_path, save_script=False)
    _train(after)
    assert json.loads((after.run_dir / "run.json").read_text())["status"] == "finished"


class _SilentEndpoint:
    """An S3 endpoint on 127.0.0.1 that accepts connections and never answers."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.conns: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self.conns.append(self.sock.accept()[0])

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        for conn in self.conns:
            conn.close()
        self.sock.close()


class _CtrlCSoon(TrainerCallback):
    """Presses Ctrl-C ``after`` seconds after training ended (during the final upload)."""

    def __init__(self, after: float) -> None:
        self.after, self.armed, self.timer = after, True, None

    def _interrupt(self, signum: int, frame: Any) -> None:
        if self.armed:
            self.armed = False
            raise KeyboardInterrupt

    def on_training_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.timer = threading.Timer(self.after, os.kill, (os.getpid(), signal.SIGINT))
        self.timer.start()


def test_ctrl_c_during_the_final_upload_does_not_leave_the_run_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = _SilentEndpoint()
    for name, value in (("AWS_ENDPOINT_URL", endpoint.url), ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    exp = Experiment(
        "sweep",
        "lin",
        root=tmp_path,
        save_script=False,
        storage="s3://bucket/team",
        upload_process=False,
        on_storage_error="continue",
        upload_timeouts=StorageTimeouts(connect=0.2, read=0.3, call=0.5, final=20.0),
    )
    ctrl_c = _CtrlCSoon(after=0.5)
    previous = signal.signal(signal.SIGINT, ctrl_c._interrupt)
    try:
        with pytest.raises(KeyboardInterrupt), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            make_trainer([ctrl_c, exp]).train(tiny_data(32), num_epochs=1, per_device_batch_size=16)
    finally:
        ctrl_c.armed = False
        if ctrl_c.timer is not None:
            ctrl_c.timer.cancel()
            ctrl_c.timer.join()
        signal.signal(signal.SIGINT, previous)
        endpoint.close()

    # 'finished' means every file was uploaded and verified: none was here.
    assert json.loads((exp.run_dir / "run.json").read_text())["status"] != "finished"


def test_a_sweep_over_numpy_seeds_trains_and_records_each_seed_as_a_number(
    tmp_path: Path,
) -> None:
    seeds = np.arange(2)  # the seeds of a sweep, as NumPy integers
    losses = []
    for seed in seeds:
        exp = Experiment("sweep", "seeds", root=tmp_path, save_script=False)
        trainer = make_trainer([exp], seed=seed)
        trainer.train(tiny_data(32), num_epochs=1, per_device_batch_size=16)
        assert json.loads((exp.run_dir / "environment.json").read_text())["seed"] == int(seed)
        losses.append(trainer.run_history.get_latest_metric("train_loss_epoch"))
    again = make_trainer([], seed=1)  # a plain int gives the same run
    again.train(tiny_data(32), num_epochs=1, per_device_batch_size=16)
    assert again.run_history.get_latest_metric("train_loss_epoch") == losses[1]


def test_a_seed_that_is_no_integer_or_out_of_range_is_refused_with_the_fix() -> None:
    with pytest.raises(TypeError, match=r"received float 0\.5.*whole number"):
        seed_everything(0.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="received bool"):
        seed_everything(True)
    with pytest.raises(ValueError, match=r"received 18446744073709551616.*seed % 2\*\*32"):
        seed_everything(2**64)
