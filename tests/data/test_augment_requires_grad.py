"""A float tensor that requires grad (an adversarial or learned pre-processing step) is
augmented without torch's "Converting a tensor with requires_grad=True to a scalar"
warning, and gradients still flow back through the augmentation."""

from __future__ import annotations

import warnings

import torch

from scramjet.data.augment import Brighten, Compose, Crop, Flip


def test_augmenting_a_tensor_that_requires_grad_warns_nothing_and_keeps_gradients() -> None:
    x = torch.rand(3, 8, 8, requires_grad=True)
    aug = Compose(Flip(p=1.0), Crop(area=(0.5, 1.0)), Brighten((0.9, 0.9)), seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = aug(x, index=0)
    assert y.requires_grad
    y.sum().backward()
    assert x.grad is not None and float(x.grad.abs().sum()) > 0
