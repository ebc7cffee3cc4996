"""run.json's status is what happened: a remote that cannot be written stops the run before
training (fast, one error) or is reported once when continuing locally; Ctrl-C reads
``interrupted``; a run whose uploads failed reads ``upload-failed`` and keeps its files."""

from __future__ import annotations

import json
import logging
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from s3_helpers import S3Server
from tracking_helpers import make_trainer, tiny_data

from scramjet.callbacks import TrainerCallback
from scramjet.cli import main
from scramjet.tracking import Experiment
from scramjet.tracking.storage import StorageCheckError, StorageTimeouts


def _status(run: Path) -> dict[str, Any]:
    info: dict[str, Any] = json.loads((run / "run.json").read_text())
    return info


def _no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))


class _Steps(TrainerCallback):
    def __init__(self) -> None:
        self.steps = 0

    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        self.steps += 1


@pytest.mark.serial  # a wall-clock bound: run alone, not beside other tests
@pytest.mark.parametrize("problem", ["credentials", "bucket"])
def test_unwritable_storage_fails_fast_with_one_error_before_training(
    s3: S3Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    problem: str,
) -> None:
    bucket = s3.new_bucket() if problem == "credentials" else "no-such-bucket"
    if problem == "credentials":
        _no_credentials(monkeypatch, tmp_path)
    exp = Experiment("p", "e", root=tmp_path / "runs", storage=f"s3://{bucket}/runs")
    steps = _Steps()
    trainer = make_trainer([exp, steps])
    started = time.monotonic()
    with caplog.at_level(logging.WARNING), pytest.raises(Exception) as raised:
        trainer.train(tiny_data(), 3, per_device_batch_size=16)
    seconds = time.monotonic() - started
    print(f"{problem}: failed after {seconds:.1f} s")
    cause = raised.value.__cause__
    assert isinstance(cause, StorageCheckError)
    message = str(raised.value)
    expected = "no credentials" if problem == "credentials" else "HTTP 404 NoSuchBucket"
    assert expected in message and f"s3://{bucket}/runs" in message
    assert "on_storage_error='local'" in message, "the error says how to continue anyway"
    assert seconds < 20, f"the check took {seconds:.1f} s (child start + one bounded probe)"
    assert steps.steps == 0, "nothing was trained before the error"
    assert not [r for r in caplog.records if "retry" in r.getMessage()], "no retry lines"
    info = _status(exp.run_dir)
    assert info["status"] == "failed" and expected in info["error"]
    if problem == "credentials":
        assert s3.list_keys(bucket) == {}, "nothing was written without credentials"


def test_continue_locally_warns_exactly_once_and_finishes(
    s3: S3Server, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    exp = Experiment(
        "p", "e", root=tmp_path / "runs", storage="s3://no-such-bucket/x", on_storage_error="local"
    )
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        make_trainer([exp]).train(tiny_data(), 2, per_device_batch_size=16)
    storage_warnings = [w for w in caught if "no-such-bucket" in str(w.message)]
    assert len(storage_warnings) == 1, [str(w.message) for w in caught]
    assert "local files only" in str(storage_warnings[0].message)
    assert not [r for r in caplog.records if "no-such-bucket" in r.getMessage()]
    info = _status(exp.run_dir)
    assert info["status"] == "finished" and "NoSuchBucket" in info["storage_error"]
    assert info["remote"] is None and exp.upload_report is None
    assert (exp.run_dir / "model" / "model.pt").is_file()


def test_bad_on_storage_error_says_what_is_expected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"'raise', 'local' or 'continue'; received 'ignore'"):
        Experiment("p", "e", root=tmp_path, on_storage_error="ignore")


class _CtrlC(TrainerCallback):
    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.global_step == 5:
            raise KeyboardInterrupt


def test_keyboard_interrupt_gives_interrupted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    exp = Experiment("p", "ctrlc", root=tmp_path, log_every_n_steps=1, loggers=("csv", "mlflow"))
    started = time.time()
    with pytest.raises(KeyboardInterrupt):
        make_trainer([exp, _CtrlC()]).train(tiny_data(), 3, per_device_batch_size=16)
    info = _status(exp.run_dir)
    assert info["status"] == "interrupted" and info["error"].startswith("KeyboardInterrupt")
    mlflow_run = MlflowClient((tmp_path / "mlruns").as_uri()).get_run(info["mlflow_run_id"])
    assert mlflow_run.info.status == "KILLED"
    assert len(mlflow_run.data.metrics) >= 2, "the steps before Ctrl-C reached MLflow too"
    assert started <= info["ended"] <= time.time()
    assert info["duration"] == pytest.approx(info["ended"] - info["started"], abs=1e-3)
    rows = (exp.run_dir / "metrics.csv").read_text().splitlines()
    assert {line.split(",")[2] for line in rows[1:] if ",train_loss," in line} == {
        "1",
        "2",
        "3",
        "4",
        "5",
    }, "the steps before Ctrl-C are kept"
    capsys.readouterr()
    assert main(["runs", str(tmp_path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if exp.run_dir.name in x)
    assert "interrupted" in line.split()


def test_other_errors_give_failed(tmp_path: Path) -> None:
    class Boom(TrainerCallback):
        def on_train_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
            raise RuntimeError("disk on fire")

    exp = Experiment("p", "boom", root=tmp_path)
    with pytest.raises(Exception, match="disk on fire"):
        make_trainer([exp, Boom()]).train(tiny_data(), 2, per_device_batch_size=16)
    info = _status(exp.run_dir)
    assert info["status"] == "failed" and "disk on fire" in info["error"]


class _StopsAt(TrainerCallback):
    """Raises ``error`` in the middle of epoch 2, in the batch after update 9."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def on_train_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.global_step == 9:
            raise self.error


@pytest.mark.parametrize(
    ("error", "status"), [(KeyboardInterrupt(), "interrupted"), (OSError("gone"), "failed")]
)
def test_a_run_stopped_mid_epoch_records_its_last_step(
    tmp_path: Path, error: BaseException, status: str
) -> None:
    exp = Experiment("p", "stop", root=tmp_path, log_every_n_steps=4)
    trainer = make_trainer([exp, _StopsAt(error)])
    with pytest.raises(BaseException):  # noqa: B017 (KeyboardInterrupt or the callback error)
        trainer.train(tiny_data(), 3, per_device_batch_size=16)
    info = _status(exp.run_dir)
    assert info["status"] == status
    assert info["last_step"] == trainer.state.global_step == 9, "the updates that completed"
    assert info["error"] == ("KeyboardInterrupt" if status == "interrupted" else info["error"])
    steps = [r for r in (exp.run_dir / "metrics.csv").read_text().splitlines() if ",lr," in r]
    # 9 completed updates, and the one in progress: its batch loss and the rate it had
    assert [int(r.split(",")[2]) for r in steps] == list(range(1, 11))
    page = (exp.run_dir / "report.html").read_text()  # what the run did up to its end
    assert status in page and "train_loss" in page and "data:image/png;base64," in page


class _StopStore(TrainerCallback):
    """Takes the S3 server down after the first epoch (started again by the test)."""

    def __init__(self, server: S3Server) -> None:
        self.server = server

    def on_training_run_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.epoch == 0:
            self.server.stop()


def test_storage_failing_mid_run_gives_upload_failed_and_keeps_files(
    s3: S3Server, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    bucket = s3.new_bucket()
    exp = Experiment(
        "p",
        "e",
        root=tmp_path / "runs",
        storage=f"s3://{bucket}/runs",
        sync_every_s=0,
        upload_attempts=2,
        upload_timeouts=StorageTimeouts(connect=0.5, read=0.5, call=1.0, final=3.0),
    )
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            make_trainer([exp, _StopStore(s3)]).train(tiny_data(), 2, per_device_batch_size=16)
    finally:
        s3.start()
    upload_warnings = [w for w in caught if "upload-failed" in str(w.message)]
    assert len(upload_warnings) == 1, [str(w.message) for w in caught]
    printed = capfd.readouterr().err  # the upload process writes to the same stderr
    assert printed.count("retrying with backoff") == 1, printed  # one line, not one per try
    assert exp.upload_report is not None and exp.upload_report.failed_attempts >= 2
    info = _status(exp.run_dir)
    assert info["status"] == "upload-failed" and info["upload_error"]
    assert info["last_step"] == 12
    assert exp.upload_report is not None and not exp.upload_report.ok
    for rel in ("metrics.csv", "report.html", "model/model.pt", "manifest.json"):
        assert (exp.run_dir / rel).stat().st_size > 0, rel
    assert main(["runs", str(tmp_path / "runs")]) == 0
    line = next(x for x in capfd.readouterr().out.splitlines() if exp.run_dir.name in x)
    assert "upload-failed" in line.split()


def _train_loss_steps(run: Path) -> list[int]:
    rows = (run / "metrics.csv").read_text().splitlines()[1:]
    return [int(r.split(",")[2]) for r in rows if r.startswith("step,") and ",train_loss," in r]


def test_train_called_again_from_step_zero_starts_a_new_run_folder(tmp_path: Path) -> None:
    # Staged training (a frozen backbone, then all weights) on one Trainer and Experiment:
    # the second train() starts at step 0, so in the same folder its rows would repeat
    # steps 1..N and its checkpoints would mix with the first stage's.
    exp = Experiment("p", "stages", root=tmp_path, log_every_n_steps=1, checkpoint="epoch")
    trainer = make_trainer([exp])
    trainer.train(tiny_data(), 2, per_device_batch_size=16)
    first = exp.run_dir
    trainer.train(tiny_data(), 1, per_device_batch_size=16)
    second = exp.run_dir
    assert second != first and second.parent == first.parent
    assert _train_loss_steps(first) == list(range(1, 13))
    assert _train_loss_steps(second) == list(range(1, 7))
    assert _status(first)["status"] == _status(second)["status"] == "finished"
    assert _status(second)["previous_run"] == first.name and "resumed" not in _status(second)
    assert [p.name for p in (first / "checkpoints").glob("*.pt")] == ["ckpt-000002-step12.pt"]
    assert [p.name for p in (second / "checkpoints").glob("*.pt")] == ["ckpt-000001-step6.pt"]


def test_train_resumed_in_the_same_process_continues_the_same_run_folder(tmp_path: Path) -> None:
    exp = Experiment("p", "more", root=tmp_path, log_every_n_steps=1, checkpoint="epoch")
    trainer = make_trainer([exp])
    trainer.train(tiny_data(), 2, per_device_batch_size=16)
    first = exp.run_dir
    trainer.train(tiny_data(), 3, per_device_batch_size=16, resume_from=exp.checkpoint_dir)
    assert exp.run_dir == first
    assert _train_loss_steps(first) == list(range(1, 19))
    assert "previous_run" not in _status(first)


def test_train_again_after_a_failure_leaves_the_failed_run_as_it_ended(tmp_path: Path) -> None:
    exp = Experiment("p", "retry", root=tmp_path, log_every_n_steps=1)
    stop = _StopsAt(OSError("disk gone"))
    trainer = make_trainer([exp, stop])
    with pytest.raises(Exception, match="disk gone"):
        trainer.train(tiny_data(), 3, per_device_batch_size=16)
    failed = exp.run_dir
    trainer.train(tiny_data(), 1, per_device_batch_size=16)  # 6 updates: stop is not reached
    assert exp.run_dir != failed
    assert _status(failed)["status"] == "failed" and _train_loss_steps(failed) == list(range(1, 11))
    assert _status(exp.run_dir)["status"] == "finished"
    assert _train_loss_steps(exp.run_dir) == list(range(1, 7))


def test_a_report_that_cannot_be_built_leaves_a_finished_run_finished_and_uploaded(
    tmp_path: Path, s3: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The report is made from the run's files; a plotting library that fails (one left
    # half-imported by a Ctrl-C in a notebook, say) must not turn a trained run into a failed one.
    from scramjet.tracking import report

    def broken(run_dir: Any) -> Any:
        raise AttributeError("module 'matplotlib' has no attribute 'get_data_path'")

    monkeypatch.setattr(report, "build_plots", broken)
    bucket = s3.new_bucket()
    exp = Experiment("p", "r", root=tmp_path, save_script=False, storage=f"s3://{bucket}/runs")
    with pytest.warns(
        RuntimeWarning, match=r"report of the ended run could not be built.*get_data_path"
    ):
        make_trainer([exp]).train(tiny_data(32), 1, per_device_batch_size=16)
    assert _status(exp.run_dir)["status"] == "finished"
    assert exp.upload_report is not None and exp.upload_report.ok
    keys = s3.list_keys(bucket)
    assert any(k.endswith("/run.json") for k in keys) and any(
        k.endswith("/metrics.csv") for k in keys
    )
    monkeypatch.undo()  # the plots work again: the command in the warning builds the report
    assert main(["report", str(exp.run_dir)]) == 0
    assert (exp.run_dir / "report.html").is_file()
