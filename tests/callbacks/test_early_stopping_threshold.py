"""EarlyStoppingCallback's threshold: the margin an improvement must exceed, never below 0.

A negative threshold (Keras users write ``min_delta=-0.01``) made every value up to that
much worse count as an improvement: the best value drifted with a worsening metric and
the run never stopped. A NaN threshold made nothing an improvement.
"""

from __future__ import annotations

import math

import pytest
from tests.common.world import TinyMLP, blobs, make_trainer

from scramjet import Trainer
from scramjet.callbacks import EarlyStoppingCallback


class _Worsening(Trainer):
    """Records a ``score`` that gets worse by 0.05 every epoch."""

    def train_epoch_end(self) -> None:
        super().train_epoch_end()
        self.run_history.update_metric("score", 1.0 + 0.05 * self.run_history.current_epoch)


@pytest.mark.parametrize("threshold", [-0.1, -1e-9, math.nan, math.inf])
def test_a_threshold_that_is_not_a_finite_number_at_least_0_is_refused(threshold: float) -> None:
    with pytest.raises(ValueError, match=r"early_stopping_threshold.*≥ 0.*received") as info:
        EarlyStoppingCallback(early_stopping_threshold=threshold)
    assert repr(threshold) in str(info.value)


def test_a_worsening_metric_stops_the_run_with_a_zero_threshold() -> None:
    stopper = EarlyStoppingCallback(2, 0.0, watch_metric="score")
    trainer = make_trainer(TinyMLP(), callbacks=[stopper], trainer_cls=_Worsening)
    trainer.train(blobs(n=8), num_epochs=6, per_device_batch_size=4)
    assert len(trainer.run_history.get_metric_values("score")) == 3
    assert stopper.best == pytest.approx(1.05)
