"""Mixed precision on CPU: bf16 and fp16 autocast, GradScaler for fp16, the env variable."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from tests.common.world import TinyMLP, accuracy, blobs, make_trainer

from scramjet import Trainer


class DtypeProbe(Trainer):
    """Records the dtype of the model outputs the loss saw."""

    seen: list[torch.dtype]

    def calculate_train_batch_loss(self, batch: Any) -> dict[str, Any]:
        out = super().calculate_train_batch_loss(batch)
        self.seen = [*getattr(self, "seen", []), out["model_outputs"].dtype]
        return out


@pytest.mark.parametrize(
    ("precision", "dtype"), [("bf16", torch.bfloat16), ("fp16", torch.float16)]
)
def test_mixed_precision_trains_on_cpu(precision: str, dtype: torch.dtype) -> None:
    data = blobs(n=120)
    model = TinyMLP()
    trainer = make_trainer(model, lr=0.2, precision=precision, trainer_cls=DtypeProbe, seed=0)
    assert isinstance(trainer, DtypeProbe)
    trainer.train(data, num_epochs=4, per_device_batch_size=16)
    assert set(trainer.seen) == {dtype}
    assert all(p.dtype == torch.float32 for p in model.parameters()), "weights stay fp32"
    losses = trainer.run_history.get_metric_values("train_loss_epoch")
    assert losses[-1] < losses[0] / 2
    assert accuracy(model, data) > 0.9


def test_fp16_uses_a_grad_scaler_and_bf16_does_not() -> None:
    fp16 = make_trainer(TinyMLP(), precision="fp16")
    assert isinstance(fp16.scaler, torch.amp.GradScaler)
    fp16.train(blobs(n=16), num_epochs=1, per_device_batch_size=8)
    assert fp16.scaler.get_scale() > 1.0  # the loss really was scaled
    assert make_trainer(TinyMLP(), precision="bf16").scaler is None
    assert make_trainer(TinyMLP()).scaler is None


def test_accelerate_env_variable_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    assert make_trainer(TinyMLP()).precision == "bf16"
    assert make_trainer(TinyMLP(), precision="no").precision == "no", "an explicit value wins"
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "fp16")
    assert make_trainer(TinyMLP()).precision == "fp16"
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "int4")
    with pytest.raises(ValueError, match="Unknown precision 'int4'"):
        make_trainer(TinyMLP())


def test_no_env_means_full_precision(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    trainer = make_trainer(TinyMLP(), trainer_cls=DtypeProbe)
    assert isinstance(trainer, DtypeProbe)
    trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=8)
    assert trainer.precision == "no" and trainer.seen == [torch.float32]


def test_precision_type_error() -> None:
    with pytest.raises(TypeError, match="precision must be a string"):
        make_trainer(TinyMLP(), precision=16)
