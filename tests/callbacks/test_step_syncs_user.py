"""Host-device synchronisations a training step pays for, counted on the CPU.

On a GPU, ``.item()``, ``.tolist()``, ``.cpu()``, ``float(t)``, ``bool(t)`` and printing a
tensor wait for the device. There is no GPU in the tests, so the Tensor methods that
would wait are wrapped with counters while a run is in its steady state, and the tests
compare the counts (deterministic) with what the docs promise: no synchronisation per
step from the Trainer, its shipped callbacks and the Dashboard; a documented constant
per group of steps where the docs name one (the NaN guard, the Experiment's flushes).
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.common.world import blobs, make_trainer

from scramjet.callbacks import (
    EarlyStoppingCallback,
    LogMetricsCallback,
    ModelEmaCallback,
    PrintProgressCallback,
    ProgressBarCallback,
    SaveBestModelCallback,
    SaveTrainingStateCallback,
    TerminateOnNaNCallback,
    TrainerCallback,
)
from scramjet.dashboard import Dashboard

#: Tensor methods that copy a value to the host (or print it) and so wait for the device.
SYNCING = (
    "item",
    "tolist",
    "cpu",
    "numpy",
    "__bool__",
    "__float__",
    "__int__",
    "__index__",
    "__format__",
    "__repr__",
)


class SyncCount:
    """Calls of the syncing methods, each as ``(method, file of the caller, main thread)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, bool]] = []
        self.on = True

    def main(self, in_file: str | None = None) -> list[tuple[str, str, bool]]:
        """The calls made on the main thread (from ``in_file`` only, when given)."""
        return [c for c in self.calls if c[2] and (in_file is None or Path(c[1]).name == in_file)]


@contextlib.contextmanager
def counting_syncs() -> Iterator[SyncCount]:
    """Wrap the syncing Tensor methods with a counter; the originals are put back after."""
    count = SyncCount()
    inside = threading.local()
    saved = {name: (name in torch.Tensor.__dict__, getattr(torch.Tensor, name)) for name in SYNCING}

    def wrap(name: str, original: Any) -> Any:
        def counted(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if count.on and not getattr(inside, "depth", 0):  # not the calls inside a call
                caller = sys._getframe(1).f_code.co_filename
                main = threading.current_thread() is threading.main_thread()
                count.calls.append((name, caller, main))
            inside.depth = getattr(inside, "depth", 0) + 1
            try:
                return original(self, *args, **kwargs)
            finally:
                inside.depth -= 1

        return counted

    for name, (_, original) in saved.items():
        setattr(torch.Tensor, name, wrap(name, original))
    try:
        yield count
    finally:
        for name, (own, original) in saved.items():
            if own:
                setattr(torch.Tensor, name, original)
            else:
                delattr(torch.Tensor, name)


class StepWindows(TrainerCallback):
    """Counts syncs on the main thread between optimizer steps ``marks[0]..marks[1]`` and
    ``marks[1]..marks[2]`` (steady state: loaders built, callbacks started)."""

    def __init__(self, count: SyncCount, marks: tuple[int, int, int] = (16, 32, 64)) -> None:
        self.count, self.marks = count, marks
        self.per_window: list[list[tuple[str, str, bool]]] = []
        count.on = False

    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        step = trainer.state.global_step
        if step not in self.marks:
            return
        if self.count.on:
            self.per_window.append(self.count.main())
        self.count.calls.clear()
        self.count.on = step != self.marks[-1]


def _steady_syncs(
    callbacks: list[TrainerCallback], samples: int = 320, **train_kwargs: Any
) -> list[int]:
    """Main-thread syncs in steps 16..32 and 32..64 of a 1-epoch run of batches of 4."""
    with counting_syncs() as count:
        windows = StepWindows(count)
        trainer = make_trainer(callbacks=[*callbacks, windows])
        trainer.train(blobs(samples), num_epochs=1, per_device_batch_size=4, **train_kwargs)
    assert len(windows.per_window) == 2
    return [len(w) for w in windows.per_window]


def test_the_counter_sees_a_sync_and_puts_the_methods_back() -> None:
    before = torch.Tensor.__dict__.get("__float__")
    with counting_syncs() as count:
        float(torch.tensor(1.5))
        torch.tensor([1.0, 2.0]).tolist()
    assert [c[0] for c in count.calls] == ["__float__", "tolist"]
    assert torch.Tensor.__dict__.get("__float__") is before


@pytest.mark.parametrize(
    "make",
    [
        lambda tmp: [],
        lambda tmp: [ProgressBarCallback(file=io.StringIO(), interval=3600.0)],
        lambda tmp: [LogMetricsCallback(file=io.StringIO())],
        lambda tmp: [PrintProgressCallback(file=io.StringIO())],
        lambda tmp: [EarlyStoppingCallback(early_stopping_patience=2)],
        lambda tmp: [ModelEmaCallback(decay=0.9)],
        lambda tmp: [SaveBestModelCallback(tmp / "best.pt")],
        lambda tmp: [
            Dashboard(
                log_path=str(tmp / "aerolog"),
                file=io.StringIO(),
                force_terminal=False,
                print_every=3600.0,
                show_memory=False,
            )
        ],
    ],
    ids=[
        "bare",
        "progress_bar",
        "metric_lines",
        "print_progress",
        "early_stop",
        "ema",
        "best_model",
        "dashboard",
    ],
)
def test_a_steady_training_step_waits_for_the_device_nowhere(make: Any, tmp_path: Path) -> None:
    assert _steady_syncs(make(tmp_path), eval_dataset=blobs(8)) == [0, 0]


def test_clipping_and_accumulation_add_no_sync_per_step() -> None:
    assert _steady_syncs([], gradient_clip_norm=1.0) == [0, 0]
    accumulated = _steady_syncs(
        [], samples=640, gradient_clip_value=1.0, gradient_accumulation_steps=2
    )
    assert accumulated == [0, 0]


def test_the_nan_guard_syncs_once_per_check_every_batches() -> None:
    # Steps 16..32 and 32..64 hold the checks at batches 24, 32 and 40, 48, 56, 64.
    assert _steady_syncs([TerminateOnNaNCallback(check_every=8)]) == [2, 4]


def _gauged_board(values: list[torch.Tensor]) -> Dashboard:
    board = Dashboard(
        file=io.StringIO(), force_terminal=False, print_every=3600.0, show_memory=False, span=30
    )
    for mile, value in enumerate(values):
        board.gauge({"loss": value}, mile, 0, 100, "train")
    return board


def test_dashboard_reads_gauged_tensors_once_with_one_copy_not_at_every_redraw() -> None:
    # Each redraw converted every shown point again (span + window float() calls, each a
    # device sync, held under the lock gauge() needs), for as long as the points stayed.
    board = _gauged_board([torch.tensor(float(i)) for i in range(20)])
    try:
        with counting_syncs() as count:
            first = board.snapshot()
            for _ in range(5):
                board.snapshot()
        assert [c[0] for c in count.calls] == ["tolist"]
        assert [y for _, y in first.curves["loss"]["train"]] == [float(i) for i in range(20)]
        assert first.metrics["train"]["loss"] == "19"
    finally:
        board.close()


def test_dashboard_gauge_values_are_read_outside_the_lock_the_loop_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The copy from the device happens while gauge() can still take the lock: the loop
    # never waits for the display thread's sync.
    board = _gauged_board([torch.tensor(1.0), torch.tensor(2.0)])
    held: list[bool] = []
    original = torch.Tensor.tolist

    def take_and_give_back() -> None:
        got = board._lock.acquire(timeout=1)
        held.append(got)
        if got:
            board._lock.release()

    def probe(t: torch.Tensor) -> Any:
        other = threading.Thread(target=take_and_give_back)
        other.start()
        other.join()
        return original(t)

    monkeypatch.setattr(torch.Tensor, "tolist", probe)
    try:
        board.snapshot()
    finally:
        monkeypatch.undo()
        board.close()
    assert held == [True]


def test_dashboard_turns_a_runs_queued_losses_into_numbers_with_one_copy() -> None:
    # 80 batches queued while no redraw happened: the epoch's end reads them all at once.
    with counting_syncs() as count:
        board = Dashboard(
            file=io.StringIO(), force_terminal=False, print_every=3600.0, show_memory=False
        )
        make_trainer(callbacks=[board]).train(blobs(320), num_epochs=1, per_device_batch_size=4)
    from_board = [c for c in count.calls if Path(c[1]).parent.name == "dashboard"]
    assert [c[0] for c in from_board] == ["tolist"]
    curve = board.snapshot().curves["loss"]["train"]
    assert len(curve) == board.span + board.window  # the points a redraw copies
    assert all(isinstance(y, float) and y == y for _, y in curve)


def test_a_mid_epoch_checkpoint_copies_the_epoch_losses_in_one_transfer(tmp_path: Path) -> None:
    with counting_syncs() as count:
        windows = StepWindows(count, marks=(38, 39, 41))
        saver = SaveTrainingStateCallback(tmp_path / "ckpt", every_n_steps=40)
        trainer = make_trainer(callbacks=[saver, windows])
        trainer.train(blobs(320), num_epochs=1, per_device_batch_size=4)
    # The window 39..41 holds the checkpoint taken at step 40 (40 losses recorded).
    at_checkpoint = windows.per_window[1]
    copies = [c for c in at_checkpoint if c[0] == "cpu" and Path(c[1]).name == "state.py"]
    assert len(copies) <= 1, f"{len(copies)} copies of the epoch's losses"


def test_a_log_every_n_steps_experiment_reads_its_step_values_once_per_flush(
    tmp_path: Path,
) -> None:
    from scramjet.tracking import Experiment

    class Logs(TrainerCallback):
        def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
            trainer.log("w_norm", trainer.unwrapped_model.net[0].weight.detach().norm())

    exp = Experiment(
        "syncs",
        "flush",
        root=tmp_path,
        save_script=False,
        log_every_n_steps=16,
        sync_every_s=0,
        checkpoint=None,
    )
    # Steps 16..32 and 32..64 hold the flushes at 32 and 48, 64: one copy (and a
    # tolist of the host tensor) each.
    counts = _steady_syncs([exp, Logs()])
    assert counts == [2, 4]


def test_aitoolbox_grad_norm_clipping_adds_no_sync_per_update() -> None:
    from torch.utils.data import DataLoader

    from scramjet.compat.aitoolbox.torchtrain.callbacks.gradient import GradNormClip
    from scramjet.compat.aitoolbox.torchtrain.model import TTModel
    from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoop

    class Net(TTModel):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(8, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x)

        def get_loss(self, batch: Any, criterion: Any, device: Any) -> torch.Tensor:
            x, y = batch
            return criterion(self(x.to(device)), y.to(device))

        def get_predictions(self, batch: Any, device: Any) -> Any:
            x, y = batch
            return self(x.to(device)).argmax(1).cpu(), y.cpu(), {}

    def syncs_in_gradient_callbacks(batches: int) -> int:
        torch.manual_seed(0)
        model = Net()
        loader = DataLoader(blobs(4 * batches), batch_size=4)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loop = TrainLoop(model, loader, None, None, opt, torch.nn.CrossEntropyLoss())
        with counting_syncs() as count, contextlib.redirect_stdout(io.StringIO()):
            loop.fit(num_epochs=1, callbacks=[GradNormClip(1.0)])
        return sum(Path(c[1]).name == "gradient.py" for c in count.calls)

    assert syncs_in_gradient_callbacks(40) == syncs_in_gradient_callbacks(10)
