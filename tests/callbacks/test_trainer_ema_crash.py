"""ModelEmaCallback puts the trained weights back when an evaluation inside train() fails."""

from __future__ import annotations

import pytest
import torch
from tests.common.world import TinyMLP, blobs, make_trainer

from scramjet.callbacks import ModelEmaCallback


class FailsInEvaluation(TinyMLP):
    def __init__(self) -> None:
        super().__init__()
        self.fail = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fail and not self.training:
            raise RuntimeError("a broken evaluation sample")
        return super().forward(x)


def test_a_failed_evaluation_leaves_the_trained_weights_in_the_model() -> None:
    model, ema = FailsInEvaluation(), ModelEmaCallback(decay=0.5)
    trainer = make_trainer(model, callbacks=[ema])
    trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=4)
    model.fail = True
    seen: dict[str, torch.Tensor] = {}
    record_loss = trainer.train_epoch_end

    def keep_trained() -> None:  # the weights as the epoch's training left them
        seen.update({k: v.detach().clone() for k, v in model.state_dict().items()})
        record_loss()

    trainer.train_epoch_end = keep_trained  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="broken evaluation sample"):
        trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=4, eval_dataset=blobs(n=8))
    assert ema.ema_model is not None
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, seen[name], rtol=0, atol=0)
    ema_weight = ema.ema_model.state_dict()["net.0.weight"]
    assert not torch.equal(model.state_dict()["net.0.weight"], ema_weight)
