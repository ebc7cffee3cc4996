"""A Ctrl-C that arrives while Python runs a finalizer in the main thread.

The signal handler's ``KeyboardInterrupt`` is then raised inside a ``__del__`` method or a
``weakref`` callback, where Python cannot propagate it ("Exception ignored in ..."). During
the final upload to an object store that does not answer, the abandoned network calls
leave many such objects to free: about one Ctrl-C in a dozen was lost there, and the run
went on uploading and ended as if nobody had pressed it. Each test presses Ctrl-C from
inside a real finalizer, with Python's own SIGINT handler in place.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import warnings
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from s3_helpers import S3Server
from tracking_helpers import make_trainer, tiny_data

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback
from scramjet.tracking import Experiment
from scramjet.tracking._interrupts import keep_ctrl_c, raise_lost_ctrl_c
from scramjet.tracking.storage import RunStorage

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def press_ctrl_c_inside_a_finalizer() -> None:
    """Ctrl-C delivered while a ``weakref.finalize`` callback runs in this thread."""

    class Garbage:
        pass

    def finalizer() -> None:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10_000):  # the handler runs between these bytecodes
            pass

    garbage = Garbage()
    weakref.finalize(garbage, finalizer)
    del garbage  # freed here: the finalizer runs, and swallows the KeyboardInterrupt


@pytest.fixture()
def python_ctrl_c() -> Iterator[None]:
    """Python's own SIGINT handler (a test runner may have set another)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


class _PressAt(TrainerCallback):
    def __init__(self, event: str, step: int) -> None:
        self.event, self.step, self.calls = event, step, 0

    def _maybe_press(self) -> None:
        self.calls += 1
        if self.calls == self.step:
            press_ctrl_c_inside_a_finalizer()

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if self.event == "train":
            self._maybe_press()

    def on_eval_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if self.event == "eval":
            self._maybe_press()


def test_python_itself_loses_a_ctrl_c_pressed_inside_a_finalizer(python_ctrl_c: None) -> None:
    # What the fix answers: without keep_ctrl_c, the press is gone.
    press_ctrl_c_inside_a_finalizer()  # no KeyboardInterrupt comes out: Python printed it
    raise_lost_ctrl_c()  # outside keep_ctrl_c: nothing was kept, nothing raised


def test_a_ctrl_c_lost_in_a_finalizer_is_raised_again_once(python_ctrl_c: None) -> None:
    hook = sys.unraisablehook
    with keep_ctrl_c():
        assert sys.unraisablehook is not hook
        raise_lost_ctrl_c()  # nothing lost yet
        press_ctrl_c_inside_a_finalizer()
        with pytest.raises(KeyboardInterrupt, match="finalizer"):
            raise_lost_ctrl_c()
        raise_lost_ctrl_c()  # raised once only
        with keep_ctrl_c():  # nested: the outer one keeps it
            press_ctrl_c_inside_a_finalizer()
        with pytest.raises(KeyboardInterrupt):
            raise_lost_ctrl_c()
    assert sys.unraisablehook is hook


def test_a_ctrl_c_lost_in_a_finalizer_during_training_stops_it_at_the_next_batch(
    tmp_path: Path, python_ctrl_c: None
) -> None:
    exp = Experiment("ctrl-c", "train", root=tmp_path, save_script=False)
    trainer = make_trainer([_PressAt("train", step=2), exp])
    with pytest.raises(KeyboardInterrupt), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train(tiny_data(64), num_epochs=3, per_device_batch_size=16)  # 12 steps
    assert trainer.state.global_step == 2
    assert json.loads((exp.run_dir / "run.json").read_text())["status"] == "interrupted"


def test_a_ctrl_c_lost_in_a_finalizer_during_evaluation_stops_the_run(
    python_ctrl_c: None,
) -> None:
    trainer = make_trainer([_PressAt("eval", step=1)])
    with pytest.raises(KeyboardInterrupt):
        trainer.train(
            tiny_data(64), num_epochs=3, eval_dataset=tiny_data(64, 1), per_device_batch_size=16
        )
    assert trainer.state.epoch == 0 and trainer.state.global_step == 4


@pytest.mark.parametrize(
    ("owner", "method"),
    [(RunStorage, "finish"), (Experiment, "_end_trackers")],
    ids=["during-the-upload", "as-the-loggers-close"],
)
def test_a_ctrl_c_lost_in_a_finalizer_at_the_run_end_leaves_it_interrupted_not_mirrored(
    tmp_path: Path,
    s3: S3Server,
    python_ctrl_c: None,
    monkeypatch: pytest.MonkeyPatch,
    owner: type,
    method: str,
) -> None:
    real = getattr(owner, method)

    def with_a_press(self: Any, *args: Any, **kwargs: Any) -> Any:
        press_ctrl_c_inside_a_finalizer()  # e.g. as the abandoned calls' objects are freed
        return real(self, *args, **kwargs)

    monkeypatch.setattr(owner, method, with_a_press)
    bucket = s3.new_bucket()
    exp = Experiment(
        "ctrl-c",
        "upload",
        root=tmp_path,
        save_script=False,
        storage=f"s3://{bucket}/runs",
        upload_process=False,
    )
    with pytest.raises(KeyboardInterrupt), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        make_trainer([exp]).train(tiny_data(32), num_epochs=1, per_device_batch_size=16)
    info = json.loads((exp.run_dir / "run.json").read_text())
    assert info["status"] == "interrupted", info
    assert "cut short" in info.get("upload_error", ""), info
