"""An image-classification project from start to finish, as a user writes it.

A folder of small images in class folders plus a CSV list is packed, split, trained on with
seeded augmentations, tracked by an Experiment, interrupted and resumed; the results are
listed, reported and loaded back. The fast tests pin single steps of that journey; the slow
one runs the whole of it and checks that the resumed run ends bitwise equal to an
uninterrupted one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

from scramjet import Trainer
from scramjet.callbacks import EarlyStoppingCallback, TrainerCallback
from scramjet.data import augment as A
from scramjet.tracking import Experiment

# ------------------------------------------------------------------ augmentations


def test_crop_with_an_output_size_gives_that_size_also_when_p_skips_it() -> None:
    # Crop(size=..., p=0.5) skipped on half the samples returned them at their own size,
    # so a batch mixed 8x8 and 16x16 images and default_collate failed.
    img = np.zeros((16, 16, 3), np.uint8)
    crop = A.Compose(A.Flip(), A.Crop(size=(8, 8), p=0.5), seed=0)
    shapes = {crop(img, index=i).shape for i in range(32)}
    assert shapes == {(8, 8, 3)}
    tensor = torch.zeros(3, 16, 16)
    assert {A.Crop(size=(8, 8), p=0.0)(tensor).shape} == {torch.Size([3, 8, 8])}


def test_crop_area_given_as_one_number_is_an_error_that_says_to_pass_a_pair() -> None:
    # It was "TypeError: 'float' object is not subscriptable".
    with pytest.raises(ValueError, match=r"area must be a \(low, high\) pair.*received 0.5"):
        A.Crop(area=0.5)  # type: ignore[arg-type]


def test_normalize_with_values_for_another_number_of_channels_is_an_error() -> None:
    # Three means on a grayscale image silently turned it into three channels; two means on
    # an RGB image were a bare broadcasting RuntimeError.
    gray = np.zeros((4, 4, 1), np.uint8)
    with pytest.raises(ValueError, match=r"3 mean values for an image with 1 channel"):
        A.Normalize([0.5, 0.5, 0.5], [0.2, 0.2, 0.2])(gray)
    with pytest.raises(ValueError, match=r"2 mean values for an image with 3 channel"):
        A.Normalize([0.5, 0.5], [0.2, 0.2])(np.zeros((4, 4, 3), np.uint8))
    assert A.Normalize([0.5], [0.25])(gray).shape == (4, 4, 1)


@pytest.mark.parametrize("op", [A.Brighten, A.Contrast, A.Saturate])
def test_a_factor_range_that_goes_below_zero_is_refused(op: type[A.Brighten]) -> None:
    # Brighten(1.5) drew factors from (-0.5, 2.5): a quarter of the images came out black.
    with pytest.raises(ValueError, match=r"below 0.*d <= 1"):
        op(1.5)
    assert op(1.0).factor == (0.0, 2.0)
    assert op((0.0, 0.0)).factor == (0.0, 0.0)


# ------------------------------------------------------------------ resume with tracking


SCORES = [5.0, 4.0, 3.9, 3.8, 3.7, 3.6, 3.5, 3.4]  # improves by >= 0.5 only once


class _Score(TrainerCallback):
    """Logs a made-up per-epoch score, so early stopping's decisions are known in advance."""

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        trainer.log("score", SCORES[trainer.state.epoch])


class _CrashAtEpoch(TrainerCallback):
    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_train_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.epoch == self.epoch:
            raise RuntimeError("simulated crash")


def _epochs_run(root: Path, crash_at: int | None) -> int:
    torch.manual_seed(0)
    x = torch.randn(32, 4)
    data = list(zip(x, (x.sum(1) > 0).long()))

    def run(resume: str | None, crash: int | None) -> Trainer:
        torch.manual_seed(0)
        model = nn.Linear(4, 2)
        exp = Experiment("es", "linear", root=root, resume=resume, checkpoint="epoch")
        stop = EarlyStoppingCallback(2, 0.5, watch_metric="score")
        extra = [] if crash is None else [_CrashAtEpoch(crash)]
        trainer = Trainer(
            model,
            nn.CrossEntropyLoss(),
            torch.optim.SGD(model.parameters(), lr=0.1),
            callbacks=[_Score(), exp, stop, *extra],
            seed=0,
        )
        trainer.train(data, num_epochs=len(SCORES), per_device_batch_size=16)
        return trainer

    if crash_at is not None:
        with pytest.raises(Exception, match="simulated crash"):
            run(None, crash_at)
        trainer = run("latest", None)
    else:
        trainer = run(None, None)
    return len(trainer.run_history.get_metric_values("score"))


def test_early_stopping_resumed_from_an_experiment_checkpoint_stops_at_the_same_epoch(
    tmp_path: Path,
) -> None:
    uninterrupted = _epochs_run(tmp_path / "a", None)
    assert uninterrupted == 4  # 5 best, 4 best, 3.9 and 3.8 not 0.5 better: stop
    assert _epochs_run(tmp_path / "b", crash_at=3) == uninterrupted


# ------------------------------------------------------------------ the whole journey


def _make_photos(folder: Path) -> None:
    rng = np.random.default_rng(0)
    rows = []
    for c, name in enumerate(["red", "green", "blue"]):
        (folder / name).mkdir(parents=True)
        for i in range(40):
            img = rng.integers(0, 80, (20, 20, 3), dtype=np.uint8)
            img[..., c] += 120
            path = f"{name}/{i:03d}.{'jpg' if i % 2 else 'png'}"
            Image.fromarray(img).save(folder / path)
            rows.append(f"{path},{c}\n")
    (folder / "list.csv").write_text("image,label\n" + "".join(rows))


JOURNEY = r"""
import hashlib, sys
import torch
from torch import nn
from torch.utils.data import default_collate, random_split
from scramjet import DEFAULT_CALLBACKS, Trainer, seed_everything
from scramjet.callbacks import EarlyStoppingCallback, TrainerCallback
from scramjet.data import PackedDataset
from scramjet.data.augment import Brighten, Compose, Crop, Flip
from scramjet.metrics import ClassificationResults
from scramjet.schedulers import CosineWarmupScheduler
from scramjet.tracking import Experiment

root, crash_at = sys.argv[1], int(sys.argv[2])
augmented = PackedDataset("photos.pack", transform={"image": Compose(Flip(), Crop(area=(0.5, 1.0)), Brighten(0.2), seed=0)})
train, _ = random_split(augmented, [96, 24], generator=torch.Generator().manual_seed(0))
_, val = random_split(PackedDataset("photos.pack"), [96, 24], generator=torch.Generator().manual_seed(0))

def to_xy(samples):
    batch = default_collate(samples)
    return batch["image"].permute(0, 3, 1, 2).float() / 255, batch["label"]

class Crash(TrainerCallback):
    def on_train_step_end(self, trainer, **kwargs):
        if trainer.state.global_step == crash_at:
            raise RuntimeError("simulated crash")

seed_everything(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(8, 3))
exp = Experiment("images", "cnn", root=root, resume="auto", hyperparams={"lr": 3e-3},
                 loggers=("csv", "tensorboard"), keep_best=1)
trainer = Trainer(model, nn.CrossEntropyLoss(), torch.optim.AdamW(model.parameters(), lr=3e-3),
                  precision="bf16", seed=0,
                  callbacks=[*DEFAULT_CALLBACKS, exp, EarlyStoppingCallback(3), Crash()])
trainer.train(train, eval_dataset=val, num_epochs=3, per_device_batch_size=16, collate_fn=to_xy,
              create_scheduler_fn=CosineWarmupScheduler.create_scheduler_fn(num_warmup_epochs=1))
exp.log_results("val", ClassificationResults().evaluate(trainer, val, collate_fn=to_xy))
print("HASH", hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest())
print("RUN", exp.run_dir)
"""


@pytest.mark.slow
def test_image_journey_resumed_after_a_crash_ends_bitwise_equal(tmp_path: Path) -> None:
    _make_photos(tmp_path / "photos")
    cli = [
        sys.executable,
        "-m",
        "scramjet.cli",
        "pack",
        "photos",
        "photos/list.csv",
        "photos.pack",
        "--dtype",
        "int64",
        "--height",
        "16",
        "--width",
        "16",
        "--shards",
        "2",
    ]
    subprocess.run(cli, cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / "journey.py").write_text(JOURNEY)

    def run(root: str, crash_at: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "journey.py", root, str(crash_at)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )

    def last(out: str, key: str) -> str:
        return [line.split()[1] for line in out.splitlines() if line.startswith(key)][-1]

    whole = run("runs_a", -1)
    assert whole.returncode == 0, whole.stderr[-2000:]
    crashed = run("runs_b", 9)  # mid-epoch 2 (6 updates per epoch)
    assert crashed.returncode != 0 and "simulated crash" in crashed.stderr
    resumed = run("runs_b", -1)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert last(resumed.stdout, "HASH") == last(whole.stdout, "HASH")

    run_a, run_b = Path(last(whole.stdout, "RUN")), Path(last(resumed.stdout, "RUN"))
    assert json.loads((run_b / "run.json").read_text())["status"] == "finished"
    rows = [json.loads(line) for line in (run_b / "metrics.jsonl").read_text().splitlines()]
    rows_a = [json.loads(line) for line in (run_a / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == len(rows_a)
    results = json.loads((run_b / "results" / "val.json").read_text())
    assert sum(map(sum, results["confusion_matrix"])) == 24
    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "scramjet.cli",
            "report",
            str(run_a),
            str(run_b),
            "-o",
            str(tmp_path / "compare.html"),
        ],
        capture_output=True,
        text=True,
    )
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "compare.html").read_text()
    assert repr(results["accuracy"]) in page  # every digit


def _ema_after(folder: Path, crash_at: int | None, resume: str | None) -> dict[str, torch.Tensor]:
    from scramjet.callbacks import ModelEmaCallback, SaveTrainingStateCallback

    torch.manual_seed(0)
    x = torch.randn(64, 4)
    data = list(zip(x, (x.sum(1) > 0).long()))

    class Crash(TrainerCallback):
        def on_train_step_start(self, trainer: Trainer, **kwargs: Any) -> None:
            if trainer.state.global_step == crash_at:
                raise RuntimeError("simulated crash")

    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    ema = ModelEmaCallback()
    saver = SaveTrainingStateCallback(folder, every_n_steps=4)
    trainer = Trainer(
        model,
        nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        seed=0,
        callbacks=[saver, ema, Crash()],  # the saver first, as the README lists it
    )
    trainer.train(data, num_epochs=2, per_device_batch_size=8, resume_from=resume)
    return dict(ema.state_dict()["ema"])


def test_ema_listed_after_the_checkpoint_callback_resumes_exactly(tmp_path: Path) -> None:
    whole = _ema_after(tmp_path / "a", None, None)
    with pytest.raises(Exception, match="simulated crash"):
        _ema_after(tmp_path / "b", 5, None)
    resumed = _ema_after(tmp_path / "b", None, "auto")
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)
