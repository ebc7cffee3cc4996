"""TrainLoop (torchtrain) over the core Trainer: counters, history, hooks, losses, predictions."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from aitb_helpers import MyNeuralModel, dataset
from torch import nn
from torch.utils.data import DataLoader

from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import AbstractCallback
from scramjet.compat.aitoolbox.torchtrain.model import TTModel
from scramjet.compat.aitoolbox.torchtrain.multi_loss_optim import MultiLoss, MultiOptimizer
from scramjet.compat.aitoolbox.torchtrain.parallel import TTDataParallel
from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoop


class Recorder(AbstractCallback):
    def __init__(self) -> None:
        super().__init__("recorder")
        self.calls: list[str] = []
        self.predicted: dict[str, int] = {}

    def on_train_begin(self) -> None:
        self.calls.append("train_begin")

    def on_epoch_begin(self) -> None:
        self.calls.append("epoch_begin")

    def on_batch_begin(self) -> None:
        self.calls.append("batch_begin")

    def on_after_gradient_update(self, optimizer_idx: int) -> None:
        self.calls.append(f"grad{optimizer_idx}")

    def on_after_optimizer_step(self) -> None:
        self.calls.append("step")

    def on_batch_end(self) -> None:
        self.calls.append("batch_end")

    def on_epoch_end(self) -> None:
        self.calls.append("epoch_end")

    def on_train_end(self) -> None:
        self.calls.append("train_end")

    def on_after_batch_prediction(self, y_pred: Any, y_true: Any, meta: Any, info: Any) -> None:
        self.predicted[info["type"]] = self.predicted.get(info["type"], 0) + len(y_true)


def _loop(train_n: int = 40, batch: int = 8, **kwargs: Any) -> tuple[TrainLoop, MyNeuralModel]:
    torch.manual_seed(0)
    model = MyNeuralModel()
    train = DataLoader(dataset(train_n, 0), batch_size=batch)
    val = DataLoader(dataset(20, 1), batch_size=8)
    test = DataLoader(dataset(12, 2), batch_size=8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return TrainLoop(model, train, val, test, optimizer, nn.CrossEntropyLoss(), **kwargs), model


def _mean_loss(model: nn.Module, data: Any) -> float:
    with torch.no_grad():
        x, y = data.tensors
        return float(nn.functional.cross_entropy(model(x), y))


def test_counters_history_and_losses_follow_aitoolbox() -> None:
    loop, model = _loop()
    assert loop.total_iteration_idx == -1 and loop.train_history.train_history == {
        "loss": [],
        "accumulated_loss": [],
        "val_loss": [],
    }
    assert loop.fit(num_epochs=2) is model
    assert (loop.epoch, loop.total_iteration_idx) == (1, 9)  # 5 batches per epoch, from -1
    history = loop.train_history
    assert list(history) == ["loss", "accumulated_loss", "val_loss", "train_end_test_loss"]
    assert len(history["loss"]) == 2 and len(history["train_end_test_loss"]) == 1
    # loss: the end-of-epoch train-set loss of the final weights (per-sample mean)
    assert history["loss"][-1] == pytest.approx(_mean_loss(model, dataset(40, 0)), rel=1e-5)
    assert history["val_loss"][-1] == pytest.approx(_mean_loss(model, dataset(20, 1)), rel=1e-5)
    assert history["train_end_test_loss"][0] == pytest.approx(
        _mean_loss(model, dataset(12, 2)), rel=1e-5
    )
    assert loop.evaluate_loss_on_validation_set(force_prediction=True) == pytest.approx(
        history["val_loss"][-1], rel=1e-6
    )


def test_hook_order_with_gradient_accumulation_and_last_short_window() -> None:
    loop, _ = _loop(train_n=40, batch=8)  # 5 batches, windows of 2: updates after 2, 4, 5
    recorder = Recorder()
    loop.fit(num_epochs=1, callbacks=[recorder], grad_accumulation=2)
    assert recorder.calls == [
        "train_begin", "epoch_begin",
        "batch_begin", "batch_end",
        "batch_begin", "grad0", "step", "batch_end",
        "batch_begin", "batch_end",
        "batch_begin", "grad0", "step", "batch_end",
        "batch_begin", "grad0", "step", "batch_end",
        "epoch_end", "train_end",
    ]  # fmt: skip
    assert loop.get_num_training_steps() == 3


def test_num_iterations_counts_batches_and_stops_exactly() -> None:
    loop, _ = _loop(train_n=24, batch=8)  # 3 batches per epoch
    steps: list[int] = []
    loop.optimizer.register_step_post_hook(lambda *a: steps.append(1))
    loop.fit(num_iterations=7)
    assert (loop.total_iteration_idx, loop.epoch, len(steps)) == (6, 2, 7)
    with pytest.raises(ValueError, match="exactly one"):
        loop.fit(num_epochs=1, num_iterations=3)
    with pytest.raises(ValueError, match="exactly one"):
        loop.fit()


def test_predictions_are_cached_per_iteration_and_reach_callbacks() -> None:
    loop, model = _loop()
    recorder = Recorder()
    loop.callbacks_handler.register_callbacks([recorder])
    y_pred, y_true, meta = loop.predict_on_validation_set(execute_callbacks=True)
    assert y_true.tolist() == dataset(20, 1).tensors[1].tolist()
    assert meta["first_feature"] == dataset(20, 1).tensors[0][:, 0].tolist()
    assert recorder.predicted == {"validation": 20}
    with torch.no_grad():
        model.l2.bias[2] += 100.0  # the cached result is returned until the iteration moves on
    assert torch.equal(loop.predict_on_validation_set()[0], y_pred)
    loop.total_iteration_idx += 1
    assert loop.predict_on_validation_set()[0].tolist() == [2] * 20


class TwoHeads(TTModel):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(6, 8)
        self.head_a, self.head_b = nn.Linear(8, 3), nn.Linear(8, 3)

    def get_loss(self, batch_data: Any, criterion: Any, device: Any) -> MultiLoss:
        x, y = batch_data
        h = torch.relu(self.body(x))
        return MultiLoss({"a": criterion(self.head_a(h), y), "b": criterion(self.head_b(h), y)})

    def get_predictions(self, batch_data: Any, device: Any) -> Any:
        x, y = batch_data
        return self.head_a(torch.relu(self.body(x))), y, None


def test_multi_loss_steps_each_optimizer_with_its_own_loss() -> None:
    torch.manual_seed(0)
    model = TwoHeads()
    opt_a = torch.optim.SGD([*model.body.parameters(), *model.head_a.parameters()], lr=0.1)
    opt_b = torch.optim.SGD(model.head_b.parameters(), lr=0.1)
    loader = DataLoader(dataset(32, 0), batch_size=8)
    before_a, before_b = model.head_a.weight.clone(), model.head_b.weight.clone()
    loop = TrainLoop(
        model, loader, loader, None, MultiOptimizer([opt_a, opt_b]), nn.CrossEntropyLoss()
    )
    recorder = Recorder()
    loop.fit(num_epochs=1, callbacks=[recorder])
    assert not torch.equal(before_a, model.head_a.weight)
    assert not torch.equal(before_b, model.head_b.weight)
    assert recorder.calls.count("grad0") == recorder.calls.count("grad1") == 4
    losses = loop.evaluate_loss_on_train_set(force_prediction=True)
    assert set(losses) == {"a", "b"} and all(v > 0 for v in losses.values())


class Counting(TTModel):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 1)
        self.forward_calls = 0
        self.transfer_model_attributes = ["tag"]
        self.tag = "kept"

    def forward(self, x: Any) -> Any:
        self.forward_calls += 1
        return self.forward_calls

    def get_loss(self, batch_data: Any, criterion: Any, device: Any) -> Any:
        return self(batch_data), self.tag

    def get_predictions(self, batch_data: Any, device: Any) -> Any:
        return self(batch_data), None, None


def test_dataparallel_wrapper_routes_get_loss_through_forward() -> None:
    model = Counting()
    wrapped = TTDataParallel(model)
    assert isinstance(wrapped, nn.DataParallel)
    assert [wrapped.get_loss(0, None, None) for _ in range(3)] == [
        (1, "kept"),
        (2, "kept"),
        (3, "kept"),
    ]
    assert model.forward_calls == 3


@pytest.mark.skipif(torch.cuda.device_count() > 1, reason="checks the fallback with < 2 GPUs")
def test_dp_mode_without_two_gpus_warns_once_and_trains() -> None:
    loop, model = _loop(gpu_mode="dp")
    before = model.l1.weight.clone()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert loop.fit(num_epochs=1) is model
    assert [str(w.message) for w in caught if "gpu_mode='dp'" in str(w.message)] != []
    assert len([w for w in caught if "gpu_mode='dp'" in str(w.message)]) == 1
    assert not torch.equal(before, model.l1.weight)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs at least 2 CUDA devices")
def test_dp_mode_uses_dataparallel_on_several_gpus() -> None:
    seen: list[type] = []

    class Spy(AbstractCallback):
        def on_batch_begin(self) -> None:
            seen.append(type(self.train_loop_obj.model))

    loop, model = _loop(gpu_mode="dp")
    assert loop.fit(num_epochs=1, callbacks=[Spy("spy")]) is model
    assert seen and all(issubclass(t, nn.DataParallel) for t in seen)


def test_evaluate_loss_returns_a_tensor_unless_float_dict_format_is_asked() -> None:
    # AIToolbox returns a CPU tensor by default (callbacks call .item() on it) and a float
    # with float_dict_format=True.
    loop, model = _loop()
    loop.fit(num_epochs=1)
    for which, data in (("train", dataset(40, 0)), ("validation", dataset(20, 1))):
        loss = getattr(loop, f"evaluate_loss_on_{which}_set")()
        assert isinstance(loss, torch.Tensor) and loss.device.type == "cpu" and loss.dim() == 0
        assert loss.item() == pytest.approx(_mean_loss(model, data), rel=1e-5)
        as_float = getattr(loop, f"evaluate_loss_on_{which}_set")(float_dict_format=True)
        assert type(as_float) is float and as_float == pytest.approx(loss.item(), rel=1e-12)
    assert isinstance(loop.evaluate_loss_on_test_set(force_prediction=True), torch.Tensor)
    # the history keeps plain floats
    assert all(type(v) is float for k in ("loss", "val_loss") for v in loop.train_history[k])
