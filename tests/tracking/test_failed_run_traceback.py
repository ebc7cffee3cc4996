"""A run that an error stopped keeps the error's traceback in ``run.json`` (``traceback``),
so a failed run read later (another machine, the remote copy) says where it failed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.tracking.tracking_helpers import make_trainer, tiny_data

from scramjet.callbacks import TrainerCallback
from scramjet.tracking import Experiment, list_runs


def _fail_in_user_code() -> None:
    raise ValueError("bad batch ✗")


class FailsAtStepTwo(TrainerCallback):
    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.global_step == 2:
            _fail_in_user_code()


def test_a_failed_run_records_its_traceback(tmp_path: Path) -> None:
    exp = Experiment("proj", "crash", root=tmp_path, checkpoint=None)
    with pytest.raises(Exception, match="bad batch"):
        make_trainer([exp, FailsAtStepTwo()]).train(tiny_data(64), 1, per_device_batch_size=16)
    info = json.loads((exp.run_dir / "run.json").read_text(encoding="utf-8"))
    assert info["status"] == "failed" and info["last_step"] == 2
    assert "bad batch ✗" in info["error"]
    trace = info["traceback"]
    assert trace.startswith("Traceback (most recent call last)"), trace[:200]
    assert "_fail_in_user_code" in trace and "ValueError: bad batch ✗" in trace
    (run,) = list_runs(tmp_path)
    assert run["status"] == "failed"
    again = Experiment("proj", "crash", root=tmp_path, checkpoint=None, resume=exp.run_dir)
    with pytest.warns(UserWarning, match="without a checkpoint"):
        make_trainer([again]).train(tiny_data(32), 1, per_device_batch_size=16)
    info = json.loads((exp.run_dir / "run.json").read_text(encoding="utf-8"))
    assert info["status"] == "finished" and "traceback" not in info and "error" not in info


def test_an_interrupted_run_has_no_traceback(tmp_path: Path) -> None:
    class CtrlC(TrainerCallback):
        def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
            raise KeyboardInterrupt

    exp = Experiment("proj", "stop", root=tmp_path, checkpoint=None)
    with pytest.raises(KeyboardInterrupt):
        make_trainer([exp, CtrlC()]).train(tiny_data(32), 1, per_device_batch_size=16)
    info = json.loads((exp.run_dir / "run.json").read_text(encoding="utf-8"))
    assert info["status"] == "interrupted" and "traceback" not in info
