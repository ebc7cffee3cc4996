"""The Trainer on CUDA: mixed precision, pinned memory, non-blocking copies, compile.

Run with ``pytest -m gpu`` on a machine with an NVIDIA GPU (excluded by default).
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from tests.common.world import TinyMLP, blobs, make_trainer
from torch import nn

from scramjet import Trainer
from scramjet.accel import accelerate_model, active_backend

pytestmark = pytest.mark.gpu


class Probe(Trainer):
    """Records the output dtype, the batch's device and the DataLoader's pin_memory flag."""

    seen: list[tuple[torch.dtype, str, bool]]

    def calculate_train_batch_loss(self, batch: Any) -> dict[str, Any]:
        out = super().calculate_train_batch_loss(batch)
        pinned = bool(getattr(self._train_dl, "pin_memory", False))
        self.seen = [
            *getattr(self, "seen", []),
            (out["model_outputs"].dtype, batch[0].device.type, pinned),
        ]
        return out


def _accuracy_on(model: nn.Module, data: Any, device: torch.device) -> float:
    x, y = data.tensors
    with torch.no_grad():
        pred = model(x.to(device)).argmax(1).cpu()
    return float((pred == y).float().mean())


@pytest.mark.parametrize(
    ("precision", "dtype"),
    [("no", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16)],
)
def test_mixed_precision_trains_on_cuda(precision: str, dtype: torch.dtype) -> None:
    data = blobs(n=240)
    model = TinyMLP()
    trainer = make_trainer(model, lr=0.2, precision=precision, trainer_cls=Probe, seed=0)
    assert isinstance(trainer, Probe)
    assert trainer.device.type == "cuda", "CUDA is picked automatically"
    if precision == "fp16":
        assert isinstance(trainer.scaler, torch.amp.GradScaler)
    else:
        assert trainer.scaler is None
    trainer.train(data, num_epochs=4, per_device_batch_size=16)
    assert {s[0] for s in trainer.seen} == {dtype}
    assert {s[1] for s in trainer.seen} == {"cuda"}, "batches arrive on the GPU"
    assert all(s[2] for s in trainer.seen), "the DataLoader pins host memory on CUDA"
    assert all(p.is_cuda and p.dtype == torch.float32 for p in model.parameters())
    losses = trainer.run_history.get_metric_values("train_loss_epoch")
    assert losses[-1] < losses[0] / 2
    assert _accuracy_on(model, data, trainer.device) > 0.9
    if precision == "fp16":
        assert trainer.scaler is not None and trainer.scaler.get_scale() > 1.0


def test_cuda_matches_cpu_in_full_precision() -> None:
    """Same seed, same data, SGD: CUDA and CPU end within float tolerance of each other."""
    results = {}
    for device in ("cpu", "cuda"):
        torch.manual_seed(0)
        model = TinyMLP()
        trainer = make_trainer(model, lr=0.1, seed=1, device=device)
        trainer.train(
            blobs(n=64),
            num_epochs=2,
            per_device_batch_size=8,
            train_dataloader_kwargs={"shuffle": False},
        )
        results[device] = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    for key, value in results["cpu"].items():
        torch.testing.assert_close(results["cuda"][key], value, rtol=1e-4, atol=1e-5)


def test_compile_with_bf16_trains_on_cuda() -> None:
    torch.manual_seed(0)
    model = accelerate_model(TinyMLP(), backends=["COMPILE", "PYTORCH"])
    data = blobs(n=240)
    trainer = make_trainer(model, lr=0.2, precision="bf16", seed=0)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        trainer.train(data, num_epochs=4, per_device_batch_size=16)
    dropped = [str(w.message) for w in record if "backend" in str(w.message).lower()]
    assert dropped == [] and active_backend(model) == "COMPILE"
    losses = trainer.run_history.get_metric_values("train_loss_epoch")
    assert losses[-1] < losses[0] / 2
    model.eval()
    assert _accuracy_on(model, data, trainer.device) > 0.9


def test_a_class_weighted_loss_follows_the_model_to_the_gpu() -> None:
    # CrossEntropyLoss(weight=...) holds a CPU tensor: training on CUDA failed at the first
    # step with a device mismatch (and a hint about target dtypes), where CPU training works.
    weight = torch.tensor([4.0, 1.0, 1.0])
    loss = nn.CrossEntropyLoss(weight=weight)
    model = TinyMLP()
    trainer = make_trainer(model, lr=0.2, loss=loss, seed=0)
    data = blobs(n=96)
    trainer.train(data, num_epochs=2, per_device_batch_size=16)
    trainer.evaluate(data, per_device_batch_size=96)  # one batch: the weighted mean below
    assert loss.weight.is_cuda and torch.equal(loss.weight.cpu(), weight)
    x, y = data.tensors
    with torch.no_grad():
        expected = nn.functional.cross_entropy(model(x.cuda()), y.cuda(), weight=weight.cuda())
    got = trainer.run_history.get_latest_metric("eval_loss_epoch")
    assert abs(got - float(expected)) < 1e-5
