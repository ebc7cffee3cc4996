"""nebulae's Astro names: Craft, dock, gradient contexts, coat/shell, autoPad."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import scramjet.compat.nebulae as nebulae
from scramjet.compat.nebulae import Nozzle, Prober, Rudder, autoPad, coat, shell
from scramjet.compat.nebulae.astro import dock


def test_brochure_craft_example_runs() -> None:
    # The brochure's example with nebulae's imports replaced (and its ``super(Net, ...)``
    # typo written as plain ``super()``, which the brochure's code needs to run at all).
    nebulae.Law.CORE = "pytorch"

    class NetNeb(dock.Craft):
        def __init__(self, nclass, scope="NEB"):
            super().__init__(scope)
            self.flat = dock.Reshape()
            self.fc = dock.Dense(512, nclass)

        def run(self, x):
            x = self.flat(x, (-1, 512))
            return self.fc(x)

    class NetTorch(dock.Craft):
        def __init__(self, nclass, scope="TORCH"):
            super().__init__(scope)
            self.fc = torch.nn.Linear(512, nclass)

        def run(self, x):
            x = x.view(-1, 512)
            return self.fc(x)

    x = torch.randn(3, 2, 256)
    neb, tor = NetNeb(10), NetTorch(10)
    tor.load_state_dict(neb.state_dict())
    assert neb.scope == "NEB" and tor.scope == "TORCH"
    torch.testing.assert_close(neb(x), tor(x))


def test_craft_needs_run_and_a_scope() -> None:
    with pytest.raises(NotImplementedError, match="run"):
        dock.Craft("c")(torch.zeros(1))
    with pytest.raises(ValueError, match="scope"):
        dock.Craft("")


@pytest.mark.parametrize(
    ("size", "kernel", "dilation"),
    [((9, 12), (3, 5), 1), ((7, 8), (2, 4), 1), ((10, 11), (5, 2), (2, 1)), ((6, 6), (1, 3), 3)],
)
@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")
def test_autopad_matches_same_convolution_for_non_square_kernels(size, kernel, dilation) -> None:
    torch.manual_seed(0)
    x = torch.randn(1, 2, *size)
    w = torch.randn(3, 2, *kernel)
    padded = F.conv2d(F.pad(x, autoPad(size, kernel, 1, dilation)), w, dilation=dilation)
    same = F.conv2d(x, w, padding="same", dilation=dilation)
    assert padded.shape[-2:] == x.shape[-2:]
    torch.testing.assert_close(padded, same)


def test_autopad_order_is_last_dimension_first() -> None:
    # height kernel 3 -> 1 + 1, width kernel 7 -> 3 + 3: width (the last dim) comes first.
    assert autoPad((10, 10), (3, 7)) == (3, 3, 1, 1)
    # 3-d: (left, right, top, bottom, front, back) for (depth 5, height 3, width 1).
    assert autoPad((8, 8, 8), (5, 3, 1)) == (0, 0, 1, 1, 2, 2)
    x = torch.randn(1, 1, 8, 8, 8)
    out = F.conv3d(F.pad(x, autoPad((8, 8, 8), (5, 3, 1))), torch.randn(1, 1, 5, 3, 1))
    assert out.shape == x.shape


def test_autopad_with_stride_gives_ceil_division() -> None:
    for size, k, s in [((9, 10), (3, 4), 2), ((15, 7), (5, 3), (3, 2))]:
        x = torch.randn(1, 1, *size)
        stride = (s, s) if isinstance(s, int) else s
        out = F.conv2d(F.pad(x, autoPad(size, k, s)), torch.randn(1, 1, *k), stride=stride)
        assert list(out.shape[-2:]) == [-(-n // st) for n, st in zip(size, stride)]


def test_autopad_rejects_mismatched_lengths() -> None:
    with pytest.raises(ValueError, match="kernel"):
        autoPad((8, 8), (3, 3, 3))


def test_coat_and_shell() -> None:
    const = coat(np.arange(3))
    assert isinstance(const, torch.Tensor) and not const.requires_grad
    assert const.tolist() == [0, 1, 2]
    var = coat(2, as_const=False)
    assert var.requires_grad and var.dtype == torch.float32
    source = torch.ones(2, requires_grad=True)
    assert not coat(source).requires_grad
    arr = shell(var * 3)
    assert isinstance(arr, np.ndarray) and arr.tolist() == 6.0
    assert isinstance(shell(var, as_np=False), torch.Tensor)
    with pytest.raises(TypeError, match="received str"):
        coat("text")


def test_gradient_contexts() -> None:
    layer = torch.nn.Linear(2, 1)
    x = torch.ones(4, 2)
    with Nozzle():
        assert not layer(x).requires_grad
        with Rudder():
            out = layer(x).sum()
            assert out.requires_grad
    out.backward()
    before = layer.weight.grad.clone()
    probe_in = x.clone().requires_grad_(True)
    with Prober(layer):
        layer(probe_in).pow(2).sum().backward()
    assert probe_in.grad is not None and probe_in.grad.abs().sum() > 0
    torch.testing.assert_close(layer.weight.grad, before)  # parameters untouched


def test_prober_without_arguments_keeps_gradients_out_of_parameters() -> None:
    # "Prober is a context in which all gradients will be computed but not backpropagated."
    class Net(dock.Craft):
        def __init__(self) -> None:
            super().__init__("NET")
            self.body = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh())
            self.head = dock.Dense(4, 1)

        def run(self, x):
            return self.head(self.body(x))

    torch.manual_seed(0)
    net = Net()
    x = torch.randn(5, 3, requires_grad=True)
    with Prober():
        net(x).sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0  # computed
    assert all(p.grad is None for p in net.parameters())  # not backpropagated
    with Rudder():  # the contrast: gradients reach the parameters
        net(x).sum().backward()
    before = [p.grad.clone() for p in net.parameters()]
    with Prober():
        net(x).pow(2).sum().backward()
    for p, g in zip(net.parameters(), before):
        torch.testing.assert_close(p.grad, g)  # earlier gradients are kept as they were
    with pytest.raises(TypeError, match="Prober"):
        Prober("net")
