"""``create_scheduler_fn(num_warmup_epochs=...)`` of the warm-up schedulers: a value that is
not a finite number ≥ 0 is refused where it is given, with an error that names it, rather
than failing inside ``train()`` with Python's "cannot convert float NaN to integer"."""

from __future__ import annotations

import math

import pytest
from tests.common.world import TinyMLP, blobs, make_trainer

from scramjet.schedulers import CosineWarmupScheduler, WSDScheduler


@pytest.mark.parametrize("cls", [CosineWarmupScheduler, WSDScheduler])
@pytest.mark.parametrize("epochs", [math.nan, math.inf, "1", None, True, -1])
def test_a_warmup_that_is_not_a_number_of_epochs_is_refused_where_it_is_given(
    cls: type[CosineWarmupScheduler] | type[WSDScheduler], epochs: object
) -> None:
    with pytest.raises(ValueError, match=r"num_warmup_epochs must be a finite number ≥ 0") as info:
        cls.create_scheduler_fn(num_warmup_epochs=epochs)  # type: ignore[arg-type]
    assert f"received {epochs!r}" in str(info.value)


@pytest.mark.parametrize("epochs", [0, 0.5, 1])
def test_whole_and_fractional_warmup_epochs_count_updates(epochs: float) -> None:
    trainer = make_trainer(TinyMLP())
    trainer.train(
        blobs(n=40), num_epochs=2, per_device_batch_size=4,
        create_scheduler_fn=CosineWarmupScheduler.create_scheduler_fn(num_warmup_epochs=epochs),
    )  # fmt: skip
    assert trainer.scheduler.warmup_steps == math.ceil(10 * epochs)
    assert trainer.scheduler.total_steps == 20


def test_numpy_warmup_epochs_are_taken() -> None:
    np = pytest.importorskip("numpy")
    for epochs in (np.int64(1), np.float32(0.5)):
        CosineWarmupScheduler.create_scheduler_fn(num_warmup_epochs=epochs)  # type: ignore[arg-type]
