"""Resuming a run for more epochs: the warning says what the kept schedule will do."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from scramjet.callbacks import SaveTrainingStateCallback
from scramjet.schedulers import CosineWarmupScheduler


def _told(tmp_path: Path, make: Any, num_epochs: int, resume: bool) -> list[str]:
    from tests.common.world import TinyMLP, blobs, make_trainer

    saver = SaveTrainingStateCallback(tmp_path / "ckpt", async_write=False)
    trainer = make_trainer(TinyMLP(), callbacks=[saver], seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train(blobs(n=16), num_epochs=num_epochs, per_device_batch_size=4,
                      create_scheduler_fn=make,
                      resume_from=tmp_path / "ckpt" if resume else None)  # fmt: skip
    return [str(w.message) for w in caught if "keeps the length" in str(w.message)]


@pytest.mark.parametrize(
    ("make", "effect"),
    [
        (lambda opt: CosineWarmupScheduler(opt, total_steps=4), "the extra updates train nothing"),
        (lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4), "turns back up"),
    ],
    ids=["CosineWarmupScheduler", "CosineAnnealingLR"],
)
def test_the_warning_names_what_the_old_schedule_does(
    tmp_path: Path, make: Any, effect: str
) -> None:
    # Before: every scheduler was said to 'turn back up', but CosineWarmupScheduler stays
    # at min_lr_ratio (0): the resumed epochs trained nothing, and the warning said otherwise.
    assert _told(tmp_path, make, 1, resume=False) == []
    told = _told(tmp_path, make, 2, resume=True)
    assert len(told) == 1 and effect in told[0], told
