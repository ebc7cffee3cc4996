"""What a user who accelerates an existing training loop relies on."""

from __future__ import annotations

import copy
import random
import warnings

import pytest
import torch
from torch import nn

from scramjet.accel import (
    AccelerationWarning,
    CachedDataset,
    CacheWarning,
    accelerate_model,
    active_backend,
    fast_optimizer,
    register_backend,
    unregister_backend,
)


@pytest.fixture
def probe_backends():
    """EXACT runs the eager forward (a correct backend); SKEWED returns wrong numbers."""

    def build_exact(fn, ctx):
        return fn

    def build_skewed(fn, ctx):
        def run(*args, **kwargs):
            return fn(*args, **kwargs) * 1.5

        return run

    register_backend("EXACT", build_exact)
    register_backend("SKEWED", build_skewed)
    yield
    unregister_backend("EXACT")
    unregister_backend("SKEWED")


class _NormalisesInPlace(nn.Module):
    """A forward that changes its input in place, as ``x /= 255`` or ``x.sub_(mean)`` do."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.sub_(1.0)
        return self.lin(x)


@pytest.mark.parametrize("backend", ["EXACT", "SKEWED"])
@pytest.mark.parametrize("grad", [True, False])
def test_a_forward_that_changes_its_input_in_place_sees_it_changed_once(
    probe_backends, backend, grad
):
    torch.manual_seed(0)
    plain = _NormalisesInPlace()
    fast = accelerate_model(copy.deepcopy(plain), backends=[backend])
    x_plain, x_fast = torch.ones(4, 3), torch.ones(4, 3)
    with warnings.catch_warnings(record=True) as record, torch.set_grad_enabled(grad):
        warnings.simplefilter("always")
        expected, got = plain(x_plain), fast(x_fast)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert torch.equal(x_fast, x_plain)  # the caller's tensor changed once, as in eager
    dropped = [w for w in record if issubclass(w.category, AccelerationWarning)]
    # A correct backend passes its check; a wrong one is dropped with one warning.
    assert len(dropped) == (backend == "SKEWED")
    assert active_backend(fast) == ("EXACT" if backend == "EXACT" else "PYTORCH")


class _CoinFlipImages(torch.utils.data.Dataset):
    """Decodes, then flips at random with probability 0.5 (a typical augmentation)."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> torch.Tensor:
        image = torch.arange(6.0).reshape(2, 3) + i
        return image.flip(-1) if random.random() < 0.5 else image


class _SeededFromIndex(torch.utils.data.Dataset):
    """Draws from the global generator, but seeded by the index: the same sample each time."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> torch.Tensor:
        torch.manual_seed(1000 + i)
        return torch.randn(3)


def _cache_warnings(make) -> list[str]:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        ds = make()
    ds.close_cache()
    return [str(w.message) for w in record if issubclass(w.category, CacheWarning)]


def test_the_probe_warns_about_a_coin_flip_augmentation_even_when_both_draws_agree():
    # A seed where the probe's two calls flip alike, so their results are equal.
    seed = next(s for s in range(100) if _two_flips_agree(s))
    random.seed(seed)
    messages = _cache_warnings(lambda: CachedDataset(_CoinFlipImages()))
    assert len(messages) == 1 and "transform=" in messages[0]
    assert messages[0].startswith("_CoinFlipImages.__getitem__")  # names the user's class


def _two_flips_agree(seed: int) -> bool:
    rng = random.Random(seed)
    return (rng.random() < 0.5) == (rng.random() < 0.5)


def test_the_probe_stays_quiet_for_a_getitem_seeded_from_the_index():
    state = torch.get_rng_state()
    assert _cache_warnings(lambda: CachedDataset(_SeededFromIndex())) == []
    torch.set_rng_state(state)


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune-no-cudagraphs"])
def test_compile_with_a_mode_keeps_a_model_with_dropout_on_compile(mode):
    # cuda_graphs=True on CUDA selects "reduce-overhead" the same way.
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.3), nn.Linear(8, 2))
    plain = copy.deepcopy(net)
    fast = accelerate_model(net, backends=["COMPILE"], compile_mode=mode)
    x = torch.randn(6, 4)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        torch.manual_seed(1)
        got = fast(x)
    torch.manual_seed(1)
    expected = plain(x)
    assert [str(w.message) for w in record if issubclass(w.category, AccelerationWarning)] == []
    assert active_backend(fast) == "COMPILE"
    torch.testing.assert_close(got, expected)  # the same dropout mask as eager


@pytest.mark.filterwarnings("ignore:Sparse invariant checks are implicitly disabled")
@pytest.mark.parametrize("optimizer_cls", [torch.optim.SGD, torch.optim.Adagrad])
def test_fast_optimizer_steps_a_sparse_embedding_like_the_plain_optimizer(optimizer_cls):
    torch.manual_seed(0)
    fast_emb = nn.Embedding(10, 4, sparse=True)
    plain_emb = copy.deepcopy(fast_emb)
    fast = fast_optimizer(optimizer_cls(fast_emb.parameters(), lr=0.1))
    plain = optimizer_cls(plain_emb.parameters(), lr=0.1)
    for _ in range(3):
        for emb, opt in ((fast_emb, fast), (plain_emb, plain)):
            opt.zero_grad()
            emb(torch.tensor([1, 2, 2])).square().sum().backward()
            opt.step()
    torch.testing.assert_close(fast_emb.weight, plain_emb.weight)


@pytest.mark.parametrize("optimizer_cls", [torch.optim.AdamW, torch.optim.SGD])
def test_fast_optimizer_takes_complex_parameters(optimizer_cls):
    fast_p = nn.Parameter(
        torch.randn(3, dtype=torch.cfloat, generator=torch.Generator().manual_seed(0))
    )
    plain_p = nn.Parameter(fast_p.detach().clone())
    fast = fast_optimizer(optimizer_cls([fast_p], lr=0.1))
    plain = optimizer_cls([plain_p], lr=0.1)
    for p, opt in ((fast_p, fast), (plain_p, plain)):
        p.abs().square().sum().backward()
        opt.step()
    torch.testing.assert_close(fast_p, plain_p)
    assert fast.param_groups[0]["foreach"] is True  # the fast path that takes them


class _HoldsAModule(nn.Module):
    """A model with a submodule named ``module`` (as EMA and averaging wrappers have)."""

    def __init__(self) -> None:
        super().__init__()
        self.module = nn.Linear(3, 2)
        self.head = nn.Linear(2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.module(x))


def test_a_wrapped_model_with_a_submodule_named_module_loads_its_own_state_dict():
    fast = accelerate_model(_HoldsAModule(), backends=["PYTORCH"])
    plain = _HoldsAModule()
    assert list(fast.state_dict()) == list(plain.state_dict())
    fast.load_state_dict(plain.state_dict())
    fast.load_state_dict(fast.state_dict())
    assert torch.equal(fast.module.module.weight, plain.module.weight)


def test_load_state_dict_reports_keys_by_the_names_state_dict_gives():
    fast = accelerate_model(nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2)), backends=["PYTORCH"])
    state = fast.state_dict()
    state.pop("1.bias")
    state["2.weight"] = torch.zeros(1)
    result = fast.load_state_dict(state, strict=False)
    assert (result.missing_keys, result.unexpected_keys) == (["1.bias"], ["2.weight"])
    state["0.weight"] = torch.zeros(2, 2)
    with pytest.raises(RuntimeError) as raised:
        fast.load_state_dict(state)
    message = str(raised.value)
    assert '"1.bias"' in message and '"2.weight"' in message and "for 0.weight:" in message
    assert "module." not in message
    outer = nn.Sequential(nn.Identity(), fast)  # inside a larger model: its own prefix kept
    result = outer.load_state_dict({"1.0.weight": torch.zeros(3, 4)}, strict=False)
    assert "1.0.bias" in result.missing_keys and result.unexpected_keys == []
