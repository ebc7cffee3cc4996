"""A nebulgym user's decorated models and datasets in less common, realistic settings."""

from __future__ import annotations

import copy
import io
import warnings

import h5py
import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, jacrev, vmap
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, Dataset, Subset

from scramjet.accel import CachedDataset, accelerate_dataset, accelerate_model, engine_of
from scramjet.accel.backends import register_backend
from scramjet.compat.nebulgym import patch_torch_module


class _Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 96)
        self.bn = nn.BatchNorm1d(96)
        self.drop = nn.Dropout(0.3)
        self.head = nn.Linear(96, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.drop(torch.relu(self.bn(self.fc(x)))))


_CALLS: list[int] = []


def _build_same_as_eager(forward_fn, ctx):
    """A non-eager backend that runs eager's forward and counts its calls."""

    def run(*args, **kwargs):
        _CALLS.append(1)
        return forward_fn(*args, **kwargs)

    return run


# Registered at import: decorators check backend names when they decorate.
register_backend("SAME_AS_EAGER", _build_same_as_eager, replace=True)


@patch_torch_module(patch_backprop=False)
class BaseNet(_Mlp):
    """A decorated model class, as a library (or an older script) ships it."""


@accelerate_model(backends=["SAME_AS_EAGER"])
class DerivedNet(BaseNet):
    """A user's subclass of it, decorated again with other backends."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) * 2


def test_a_subclass_of_a_decorated_model_class_can_be_decorated_again() -> None:
    _CALLS.clear()
    torch.manual_seed(0)
    plain = _Mlp()
    torch.manual_seed(0)
    model = DerivedNet()
    x = torch.randn(16, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.manual_seed(1)
        out = model(x)  # was a RecursionError: each forward re-entered the engine
        out.sum().backward()
    torch.manual_seed(1)
    assert torch.equal(out, plain(x) * 2)
    assert _CALLS, "the outer decorator's backend runs the call"
    assert engine_of(model).active == "SAME_AS_EAGER"
    assert list(model.state_dict()) == list(plain.state_dict())
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    model.eval()
    for copied in (loaded, copy.deepcopy(model)):
        copied.eval()
        assert torch.equal(copied(x), model(x))


class _LazyNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.LazyLinear(32)
        self.bn = nn.LazyBatchNorm1d()
        self.head = nn.LazyLinear(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.bn(self.fc(x))))


@accelerate_model(backends=["SAME_AS_EAGER"])
class LazyNet(_LazyNet):
    """Lazy layers under a non-eager backend (COMPILE is the default on CUDA)."""


def test_a_model_with_lazy_layers_runs_its_first_call_eagerly_then_the_backend() -> None:
    x = torch.randn(6, 8)
    for make in (LazyNet, lambda: accelerate_model(_LazyNet(), backends=["SAME_AS_EAGER"])):
        torch.manual_seed(0)
        plain = _LazyNet()
        torch.manual_seed(0)
        model = make()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no backend dropped
            for _ in range(2):  # the first call used to fail snapshotting lazy buffers
                _CALLS.clear()
                torch.manual_seed(1)  # lazy layers draw their weights at the first call
                out = model(x)
                torch.manual_seed(1)
                assert torch.equal(out, plain(x))
                out.sum().backward()
        assert _CALLS and engine_of(model).active == "SAME_AS_EAGER"
        assert torch.equal(model.state_dict()["bn.running_mean"], plain.bn.running_mean)


class _Small(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 16)
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.fc(x)))


@accelerate_model(backends=["SAME_AS_EAGER"])
class Small(_Small):
    pass


def _per_sample_grads(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict:
    """DP-SGD style per-sample gradients through torch.func."""
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p: dict, xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        out = functional_call(model, p, (xi[None],))
        return nn.functional.cross_entropy(out, yi[None])

    return vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)


def test_torch_func_transforms_run_eagerly_and_keep_the_backend() -> None:
    torch.manual_seed(0)
    plain = _Small()
    torch.manual_seed(0)
    model = Small()
    x, y = torch.randn(6, 8), torch.randint(0, 3, (6,))
    with warnings.catch_warnings():
        # The check inside vmap/jacrev used to fail and drop the backend for good.
        warnings.simplefilter("error")
        got, want = _per_sample_grads(model, x, y), _per_sample_grads(plain, x, y)
        assert all(torch.equal(got[k], want[k]) for k in want)
        assert torch.equal(jacrev(model)(x[:2]), jacrev(plain)(x[:2]))
        _CALLS.clear()
        model(x).sum().backward()  # a plain training step still gets the backend
    assert engine_of(model).dropped == {}
    assert _CALLS and engine_of(model).active == "SAME_AS_EAGER"


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.bn = nn.BatchNorm1d(16)
        self.drop = nn.Dropout(0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.drop(torch.relu(self.bn(self.fc(x))))


@accelerate_model(backends=["SAME_AS_EAGER"])
class Block(_Block):
    pass


class _Checkpointed(nn.Module):
    """Blocks under activation checkpointing (the non-reentrant kind torch recommends)."""

    def __init__(self, block: type[nn.Module]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([block(), block()])
        self.head = nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=False)
        return self.head(x)


def test_decorated_blocks_under_non_reentrant_checkpointing_train_like_plain_ones() -> None:
    torch.manual_seed(0)
    plain = _Checkpointed(_Block)
    torch.manual_seed(0)
    fast = _Checkpointed(Block)
    x = torch.randn(8, 16)

    def step(seed: int) -> None:
        for model in (plain, fast):
            model.zero_grad()
            torch.manual_seed(seed)
            model(x).sum().backward()  # the first one used to raise CheckpointError
        for p, q in zip(plain.parameters(), fast.parameters()):
            assert torch.equal(p.grad, q.grad)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        step(0)  # unchecked yet: the checked call would not match its recomputation
        for b in fast.blocks:  # a call outside checkpointing checks the backend
            b(x)
        for b in plain.blocks:
            b(x)
        _CALLS.clear()
        step(1)
    assert len(_CALLS) == 4, "each block's forward and recomputation ran the backend"
    assert all(engine_of(b).dropped == {} for b in fast.blocks)


class _H5Images(Dataset):
    """Opens its HDF5 file on first use, so that each DataLoader worker opens its own."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.file = None
        with h5py.File(path, "r") as f:
            self.n = len(f["x"])

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.file is None:
            self.file = h5py.File(self.path, "r")
        return torch.from_numpy(self.file["x"][i])


@accelerate_dataset(max_memory_size=1 << 20)
class H5Images(_H5Images):
    pass


def test_the_random_probe_leaves_a_lazily_opened_file_closed_for_the_workers(tmp_path) -> None:
    path = str(tmp_path / "x.h5")
    data = np.arange(40 * 6, dtype=np.float32).reshape(40, 6)
    with h5py.File(path, "w") as f:
        f["x"] = data
    wrapped = _H5Images(path)
    for ds, source in (
        (H5Images(path), None),
        (CachedDataset(wrapped), wrapped),
        (CachedDataset(Subset(wrapped, range(40))), wrapped),
    ):
        source = ds if source is None else source
        # The probe reads dataset[0] twice in the main process; the handle it opened there
        # would be inherited by every forked worker (h5py handles are not fork-safe).
        assert source.file is None
        loader = DataLoader(ds, batch_size=8, num_workers=2)
        assert torch.equal(torch.cat(list(loader)), torch.from_numpy(data))
        assert source.file is None
        ds.close_cache()


@accelerate_model(backends=["SAME_AS_EAGER"])
class Exported(_Mlp):
    pass


def test_a_trained_model_exports_and_traces_like_the_plain_one() -> None:
    torch.manual_seed(0)
    plain = _Mlp()
    torch.manual_seed(0)
    model = Exported()
    x = torch.randn(4, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model(x).sum().backward()  # the training mode is checked; eval is not yet
        plain(x).sum().backward()
        model.eval()
        plain.eval()
        # The eval check ran inside the export's tracing: export failed ("fake tensor in
        # the exported program constant's list") and the backend was dropped for good.
        exported = torch.export.export(model, (x,)).module()
        assert torch.equal(exported(x), plain(x))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.trace's own
        assert torch.equal(torch.jit.trace(model, (x,))(x), plain(x))
    assert engine_of(model).dropped == {}
