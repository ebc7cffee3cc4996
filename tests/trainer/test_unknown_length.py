"""Data of unknown length: every shipped display, and exact resume from an iterable.

Displays: an ``IterableDataset`` without ``__len__`` (two epochs, evaluated on another one)
and a generator of batches (one epoch) train with the default callbacks (their output
sent to strings) plus ``PrintProgressCallback``, ``scramjet.dashboard.Dashboard`` and
``scramjet.tracking.Experiment``. No display knows the number of batches, so:

- ``ProgressBarCallback`` prints a running count of batches (non-decreasing within an
  epoch, ending at the epoch's real count) and neither a total nor an ETA;
- the Dashboard prints a running count without a total and no estimated time
  (``running``, no ETA) while a stage runs, and ``done`` when it ends;
- the Experiment's run finishes (``run.json`` says ``finished``) with ``train_loss_epoch``
  in its metrics, equal to the Trainer's history.

Exact resume with an iterable (``test_resume_mid_epoch_from_an_iterable``): an
``IterableDataset`` yields ``(x, y, index)`` in the same order every epoch. A run saves
its training state every 3 optimizer steps and crashes during step 8; a new Trainer
resumes from the checkpoint directory. What is guaranteed: the resumed run starts at the
first batch after the last checkpoint (step 7, samples 24-27); the 6 batches before the
save are *read past*: the dataset yields them again (an iterable cannot skip, so its
samples are loaded) but no forward or backward runs on them and no callback sees them.
The resumed run ends with the weights of an uninterrupted run (dropout included: the
random number generators are restored), and the resumed epoch's ``train_loss_epoch``
covers the batches from before the crash as well.

The same crash and resume with map-style data (``test_resume_mid_epoch_with_map_style_data``):
a Dataset, a Dataset with a sampler in ``train_dataloader_kwargs``, and ready
DataLoaders of batches of 4 while ``per_device_batch_size`` keeps its default of 8
(sequential, with an ``EpochSampler``, shuffled). The consumed batches are
skipped by index where the sampler can (``set_start``) and read past otherwise; the
resumed run sees exactly the batches the uninterrupted run saw after step 6 and ends
with its weights.
"""

from __future__ import annotations

import io
import json
import re
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, IterableDataset, Sampler

from scramjet import Trainer
from scramjet.callbacks import (
    LogMetricsCallback,
    MoveModulesToDeviceCallback,
    PrintProgressCallback,
    ProgressBarCallback,
    SaveTrainingStateCallback,
    TerminateOnNaNCallback,
    TrainerCallback,
)
from scramjet.dashboard import Dashboard
from scramjet.tracking import Experiment, read_metrics
from scramjet.trainer.data_order import EpochSampler

N, DIM, BS = 40, 4, 4
BATCHES = N // BS  # 10 per epoch


def task(n: int = N, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, DIM, generator=g)
    return x, (x[:, 0] - x[:, 2] > 0).long()


class Indexed(IterableDataset[tuple[torch.Tensor, torch.Tensor, int]]):
    """``(x, y, index)`` in index order, the same every epoch; no ``__len__``.

    Counts the samples it yields; ``delay`` seconds per sample slow it down so that the
    progress displays print while an epoch runs.
    """

    def __init__(self, n: int = N, seed: int = 0, delay: float = 0.0) -> None:
        self.x, self.y = task(n, seed)
        self.delay = delay
        self.reads = 0

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor, int]]:
        for i in range(len(self.y)):
            self.reads += 1
            if self.delay:
                time.sleep(self.delay)
            yield self.x[i], self.y[i], i


def batch_stream(n: int = N, delay: float = 0.0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    x, y = task(n)
    for i in range(0, n, BS):
        if delay:
            time.sleep(delay)
        yield x[i : i + BS], y[i : i + BS]


def make_model(seed: int = 0, dropout: float = 0.0) -> nn.Module:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(DIM, 16), nn.Tanh(), nn.Dropout(dropout), nn.Linear(16, 2))


# ----------------------------------------------------------------------------- displays
PROGRESS_LINE = re.compile(
    r"^epoch (\d+)/\d+ (train|eval) (\d+) batches(?: \| loss \S+)? \| [\d,]+ samples/s$"
)
BOARD_LINE = re.compile(
    r"^(train|eval) epoch \d+/\d+ (\d+)(?:/(\d+))? \| [^|]+ \| (done|running)( \| .*)?$"
)


@pytest.mark.parametrize("source", ["iterable", "generator"])
def test_every_display_runs_without_a_length(source: str, tmp_path: Path) -> None:
    progress_out, board_out, other_out = io.StringIO(), io.StringIO(), io.StringIO()
    experiment = Experiment(
        "unknown", source, root=tmp_path / "runs", log_every_n_steps=2, save_script=False
    )
    callbacks = [
        MoveModulesToDeviceCallback(),
        TerminateOnNaNCallback(),
        ProgressBarCallback(file=progress_out, interval=0.02),
        LogMetricsCallback(file=other_out),
        PrintProgressCallback(file=other_out),
        Dashboard(
            log_path=str(tmp_path / "board"), file=board_out, print_every=0.02, show_memory=False
        ),
        experiment,
    ]
    model = make_model()
    trainer = Trainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.3),
        callbacks=callbacks, seed=0,
    )  # fmt: skip
    epochs = 2 if source == "iterable" else 1
    if source == "iterable":
        data: Any = Indexed(delay=0.002)
        evaluation: Any = Indexed(12, seed=1)
    else:
        data, evaluation = batch_stream(delay=0.008), batch_stream(12)
    with warnings.catch_warnings():  # both draw progress: the Dashboard says so, and runs
        warnings.filterwarnings("ignore", "Dashboard and ProgressBarCallback")
        trainer.train(data, num_epochs=epochs, per_device_batch_size=BS, eval_dataset=evaluation)

    assert trainer.state.global_step == epochs * BATCHES
    history = trainer.run_history
    train_losses = history.get_metric_values("train_loss_epoch")
    assert (
        len(train_losses) == epochs and len(history.get_metric_values("eval_loss_epoch")) == epochs
    )

    # ProgressBarCallback: a running count, no total and no ETA.
    lines = progress_out.getvalue().splitlines()
    assert lines and "\x1b" not in progress_out.getvalue()
    parsed = []
    for line in lines:
        match = PROGRESS_LINE.match(line)
        assert match, f"not a count-only progress line: {line!r}"
        if match.group(2) == "train":
            parsed.append((int(match.group(1)), int(match.group(3))))
    assert "ETA" not in progress_out.getvalue()
    no_total = not re.search(r"(train|eval) \d+/\d", progress_out.getvalue())
    assert no_total, "no 'done/total' count"
    for epoch in range(1, epochs + 1):
        counts = [done for e, done in parsed if e == epoch]
        assert counts and counts[-1] == BATCHES, parsed  # the epoch's last line: every batch
        assert counts == sorted(counts), "the count only grows within an epoch"
    assert len(parsed) > epochs, "lines printed while the epochs ran, not only at their end"

    # The Dashboard: counts without a total while a stage runs, and no estimated time
    # ("running", no ETA); a finished stage says "done" (its count is then known).
    board_lines = [line for line in board_out.getvalue().splitlines() if line.strip()]
    assert board_lines and not re.search(r"ETA \d", board_out.getvalue())
    finished = set()
    for line in board_lines:
        match = BOARD_LINE.match(line)
        assert match, f"unexpected dashboard line: {line!r}"
        stage, done, total, end = (
            match.group(1),
            int(match.group(2)),
            match.group(3),
            match.group(4),
        )
        if end == "done":
            assert total is None or int(total) == done
            finished.add((stage, done))
        else:
            assert total is None, f"a running stage of unknown length shows a total: {line!r}"
    assert finished == {("train", BATCHES), ("eval", 3)}

    # The Experiment: a finished run with the epoch losses.
    run = experiment.run_dir
    assert json.loads((run / "run.json").read_text())["status"] == "finished"
    rows = [r for r in read_metrics(run) if r["scope"] == "epoch"]
    assert [r["metrics"]["train_loss_epoch"] for r in rows] == pytest.approx(train_losses)
    assert (run / "model" / "model.pt").is_file()
    assert "epoch 1 | eval_loss_epoch: " in other_out.getvalue()


# ----------------------------------------------------------------------------- resume
class SeenIndices(TrainerCallback):
    """``(epoch, sample indices)`` of every training step this Trainer ran."""

    def __init__(self) -> None:
        self.steps: list[tuple[int, list[int]]] = []

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.steps.append((trainer.state.epoch, kwargs["batch"][2].tolist()))


class CrashAt(TrainerCallback):
    """Raises in the forward of optimizer step ``step`` (1-based), as a killed job would."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.global_step + 1 == self.step:
            raise RuntimeError("simulated crash")


def run(
    callbacks: list[Any], model_seed: int = 0, resume_from: Path | None = None
) -> tuple[Trainer, Indexed]:
    model = make_model(model_seed, dropout=0.2)
    trainer = Trainer(
        model,
        nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        callbacks=callbacks,
        seed=0,
    )
    data = Indexed()
    trainer.train(data, num_epochs=2, per_device_batch_size=BS, resume_from=resume_from)
    return trainer, data


def test_resume_mid_epoch_from_an_iterable(tmp_path: Path) -> None:
    whole = SeenIndices()
    reference, _ = run([whole])
    assert len(whole.steps) == 2 * BATCHES

    saves = SaveTrainingStateCallback(
        tmp_path / "ckpt", every_n_steps=3, every_n_epochs=None, async_write=False
    )
    before = SeenIndices()
    with pytest.raises(RuntimeError, match="simulated crash"):
        run([before, saves, CrashAt(8)])
    assert before.steps == whole.steps[:8]  # step 8 ran its forward, then the job died

    after = SeenIndices()
    resumed, data = run([after], model_seed=1, resume_from=tmp_path / "ckpt")
    # The checkpoint of step 6 holds 6 consumed batches: the run goes on with the 7th.
    assert after.steps == whole.steps[6:]
    assert after.steps[0] == (0, [24, 25, 26, 27])
    assert data.reads == 2 * N, "the first epoch's 24 consumed samples were read past, once"
    assert resumed.state.global_step == reference.state.global_step == 2 * BATCHES
    ref_state, got_state = (
        reference.unwrapped_model.state_dict(),
        resumed.unwrapped_model.state_dict(),
    )
    for key in ref_state:
        torch.testing.assert_close(got_state[key], ref_state[key], rtol=0, atol=0, msg=key)
    ref_losses = reference.run_history.get_metric_values("train_loss_epoch")
    assert resumed.run_history.get_metric_values("train_loss_epoch") == pytest.approx(
        ref_losses, rel=1e-6
    )


class IndexedMap(Dataset[tuple[torch.Tensor, torch.Tensor, int]]):
    """The samples of :class:`Indexed`, map-style."""

    def __init__(self) -> None:
        self.x, self.y = task()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        return self.x[i], self.y[i], i


class EpochBatches(Sampler[list[int]]):
    """A batch sampler of its own (no ``batch_size``): batches of ``BS`` over an order that
    ``set_epoch`` reshuffles, as bucketing samplers do."""

    def __init__(self, n: int) -> None:
        self.n, self.epoch = n, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:
        order = torch.randperm(self.n, generator=torch.Generator().manual_seed(self.epoch))
        return iter([t.tolist() for t in order.split(BS)])

    def __len__(self) -> int:
        return -(-self.n // BS)


def map_run(
    kind: str, callbacks: list[Any], model_seed: int = 0, resume_from: Path | None = None
) -> Trainer:
    """Batches of 4 samples, however the loader is given; ``per_device_batch_size`` stays
    at its default of 8 where a ready DataLoader sets the batch size."""
    model = make_model(model_seed, dropout=0.2)
    trainer = Trainer(
        model,
        nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        callbacks=callbacks,
        seed=0,
    )
    data = IndexedMap()
    train: dict[str, Any] = {"num_epochs": 2, "resume_from": resume_from}
    if kind == "dataset":
        trainer.train(data, per_device_batch_size=BS, **train)
    elif kind == "sampler_kwarg":
        sampler = EpochSampler(data, shuffle=True, seed=7)
        kwargs = {"sampler": sampler}
        trainer.train(data, per_device_batch_size=BS, train_dataloader_kwargs=kwargs, **train)
    elif kind == "batch_sampler_kwarg":
        kwargs = {"batch_sampler": EpochBatches(len(data))}
        trainer.train(data, train_dataloader_kwargs=kwargs, **train)
    elif kind == "dataloader":
        trainer.train(DataLoader(data, batch_size=BS), **train)
    elif kind == "dataloader_shuffled":
        trainer.train(DataLoader(data, batch_size=BS, shuffle=True), **train)
    else:
        assert kind == "dataloader_epoch_sampler"
        sampler = EpochSampler(data, shuffle=True, seed=7)
        trainer.train(DataLoader(data, batch_size=BS, sampler=sampler), **train)
    return trainer


@pytest.mark.parametrize(
    "kind",
    [
        "dataset",
        "sampler_kwarg",
        "batch_sampler_kwarg",
        "dataloader",
        "dataloader_epoch_sampler",
        "dataloader_shuffled",
    ],
)
def test_resume_mid_epoch_with_map_style_data(kind: str, tmp_path: Path) -> None:
    """The same guarantee for map-style data: the consumed batches are skipped (by index
    where the sampler can, else read past), whatever sets the batch size."""
    whole = SeenIndices()
    reference = map_run(kind, [whole])
    assert len(whole.steps) == 2 * BATCHES and all(len(i) == BS for _, i in whole.steps)
    saves = SaveTrainingStateCallback(
        tmp_path / "ckpt", every_n_steps=3, every_n_epochs=None, async_write=False
    )
    with pytest.raises(RuntimeError, match="simulated crash"):
        map_run(kind, [saves, CrashAt(8)])
    after = SeenIndices()
    resumed = map_run(kind, [after], model_seed=1, resume_from=tmp_path / "ckpt")
    assert after.steps == whole.steps[6:]
    ref_state, got_state = (
        reference.unwrapped_model.state_dict(),
        resumed.unwrapped_model.state_dict(),
    )
    for key in ref_state:
        torch.testing.assert_close(got_state[key], ref_state[key], rtol=0, atol=0, msg=key)
