"""utils.ModelEma against the average the peer documents: everything in the state dict
(parameters and buffers) moves as ``decay * ema + (1 - decay) * model``."""

from __future__ import annotations

import torch
from torch import nn

from scramjet.compat.pytorch_accelerated.utils import ModelEma


def test_batch_norm_statistics_are_averaged_like_the_weights() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    ema = ModelEma(model, decay=0.9)
    before = {k: v.clone() for k, v in ema.module.state_dict().items()}
    model.train()
    model(torch.randn(16, 3) * 5 + 2)  # moves the running statistics
    with torch.no_grad():
        model[0].weight.add_(1.0)
    ema.update(model)
    now = model.state_dict()
    for name, value in ema.module.state_dict().items():
        if value.is_floating_point():
            expected = 0.9 * before[name] + 0.1 * now[name]
            torch.testing.assert_close(value, expected, msg=name)
        else:  # num_batches_tracked: a count, taken as it is
            assert torch.equal(value, now[name]), name


class RampEma(ModelEma):
    """A decay that ramps up with the updates (the YOLO pattern), counting its calls."""

    def __init__(self, model: nn.Module, decay: float = 0.9) -> None:
        super().__init__(model, decay=decay)
        self.calls = 0

    def update(self, model: nn.Module) -> None:
        self.calls += 1
        self.decay = 0.9 * (1 - 0.5**self.calls)
        super().update(model)


def test_the_callback_updates_through_the_ema_class_it_is_given() -> None:
    # The callback kept only model_ema(...).module and averaged with its own fixed-decay
    # rule (buffers copied): a class's own update() never ran.
    import copy

    from torch.utils.data import TensorDataset

    from scramjet.compat.pytorch_accelerated import Trainer
    from scramjet.compat.pytorch_accelerated.callbacks import ModelEmaCallback, TrainerCallback

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
    start = copy.deepcopy(model)
    built: list[RampEma] = []
    snapshots: list[dict[str, torch.Tensor]] = []

    def make(m: nn.Module, decay: float) -> RampEma:
        built.append(RampEma(m, decay=decay))
        return built[-1]

    class Snapshot(TrainerCallback):
        def on_optimizer_step_end(self, trainer, **kwargs) -> None:
            snapshots.append(copy.deepcopy(trainer.unwrapped_model.state_dict()))

    callback = ModelEmaCallback(decay=0.9, evaluate_during_training=False, model_ema=make)
    trainer = Trainer(model, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.1),
                      callbacks=[callback, Snapshot()])  # fmt: skip
    trainer.train(TensorDataset(torch.randn(16, 3), torch.randn(16, 1)), num_epochs=1,
                  per_device_batch_size=4)  # fmt: skip
    assert len(built) == 1 and built[0].calls == 4  # one per optimizer update
    assert callback.ema_model is built[0].module
    reference = RampEma(start)
    for state in snapshots:
        start.load_state_dict(state)
        reference.update(start)
    for name, value in reference.module.state_dict().items():  # BatchNorm's averaged too
        torch.testing.assert_close(callback.ema_model.state_dict()[name], value, msg=name)
