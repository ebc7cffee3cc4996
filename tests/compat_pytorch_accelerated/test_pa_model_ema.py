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
