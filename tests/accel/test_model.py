from __future__ import annotations

import copy
import io
import multiprocessing
import pickle
import warnings
from pathlib import Path

import pytest
import torch
from accel_helpers import DecoratedNet, SmallNet, run_model
from torch import nn

from scramjet.accel import (
    AcceleratedModel,
    AccelerationWarning,
    CachedDataset,
    TrainingLearner,
    accelerate_model,
    active_backend,
    engine_of,
    recover_backward,
    register_backend,
    unregister_backend,
)
from scramjet.accel._engine import _mismatch, _rounding_excess


def _batch(n: int = 16, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 8, generator=g), torch.randint(0, 3, (n,), generator=g)


def _train(model: nn.Module, steps: int) -> list[float]:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        x, y = _batch(seed=0)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _accel_warnings(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, AccelerationWarning)]


@pytest.fixture
def fault_backends():
    """Real backends that break in each way the engine must survive."""
    calls = {"flaky": 0}

    def build_broken(fn, ctx):
        raise RuntimeError("cannot build here")

    def build_wrong(fn, ctx):
        def run(*args, **kwargs):
            out = fn(*args, **kwargs)
            return out * 1.5  # wrong numbers: must fail the first-step check

        return run

    def build_flaky(fn, ctx):
        def run(*args, **kwargs):
            calls["flaky"] += 1
            if calls["flaky"] == 4:
                raise RuntimeError("device lost mid-training")
            return fn(*args, **kwargs)

        return run

    register_backend("BROKEN", build_broken)
    register_backend("WRONG", build_wrong)
    register_backend("FLAKY", build_flaky)
    yield calls
    for name in ("BROKEN", "WRONG", "FLAKY"):
        unregister_backend(name)


def test_decorator_keeps_identity_and_module_behaviour():
    assert DecoratedNet.__name__ == "DecoratedNet"
    assert DecoratedNet.__qualname__ == "DecoratedNet"
    assert DecoratedNet.__module__ == "accel_helpers"
    net = DecoratedNet()
    assert isinstance(net, SmallNet) and isinstance(net, DecoratedNet)
    assert list(net.state_dict()) == list(SmallNet().state_dict())
    net.eval()
    assert not net.training and not net.bn.training
    net.train()
    assert net.bn.training


def test_decorated_model_pickles_and_torch_saves():
    net = DecoratedNet()
    _train(net, 2)
    x, _ = _batch()
    net.eval()
    expected = net(x)
    clone = pickle.loads(pickle.dumps(net))
    assert type(clone) is DecoratedNet
    torch.testing.assert_close(clone(x), expected)
    buf = io.BytesIO()
    torch.save(net, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    torch.testing.assert_close(loaded(x), expected)
    torch.testing.assert_close(copy.deepcopy(net)(x), expected)


def test_forward_hooks_fire_once_per_call_in_both_forms():
    for model in (DecoratedNet(), accelerate_model(SmallNet(), backends=["PYTORCH"])):
        seen: list[tuple[int, ...]] = []
        model.register_forward_hook(lambda m, i, o, seen=seen: seen.append(tuple(o.shape)))
        model(_batch()[0])
        model(_batch(4)[0])
        assert seen == [(16, 3), (4, 3)]


def test_function_form_unwraps_and_keeps_state_dict_keys():
    inner = SmallNet()
    fast = accelerate_model(inner, backends=["PYTORCH"])
    assert isinstance(fast, AcceleratedModel) and fast.module is inner
    assert list(fast.state_dict()) == list(inner.state_dict())
    other = SmallNet()
    other.load_state_dict(fast.state_dict())  # wrapped -> plain
    fast.load_state_dict(SmallNet().state_dict())  # plain -> wrapped
    container = nn.Sequential(fast)
    assert "0.fc.weight" in container.state_dict()
    nn.Sequential(accelerate_model(SmallNet())).load_state_dict(container.state_dict())
    assert fast.head is inner.head  # attribute fall-through
    learner = TrainingLearner(SmallNet(), ["PYTORCH"])
    assert pickle.loads(pickle.dumps(learner))(_batch()[0]).shape == (16, 3)


def test_unknown_backend_lists_valid_names():
    with pytest.raises(ValueError, match=r"'TURBO'.*PYTORCH.*COMPILE.*ONNXRUNTIME.*RAMMER"):
        accelerate_model(SmallNet(), backends=["TURBO"])
    with pytest.raises(ValueError, match="TURBO"):
        accelerate_model(backends=["turbo"])(SmallNet)
    with pytest.raises(TypeError, match=r"nn\.Module"):
        accelerate_model(42)


@pytest.mark.parametrize("backends", [["RAMMER"], ["ONNXRUNTIME"], ["BROKEN"]])
def test_backend_failing_at_build_falls_back_with_one_warning(backends, fault_backends):
    model = accelerate_model(SmallNet(), backends=backends)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        losses = _train(model, 5)
        model.eval()
        model(_batch()[0])
    messages = _accel_warnings(record)
    assert len(messages) == 1 and backends[0] in messages[0] and "build" in messages[0]
    assert active_backend(model) == "PYTORCH"
    assert losses[-1] < losses[0]
    assert int(model.module.bn.num_batches_tracked) == 5


def test_backend_failing_the_check_falls_back(fault_backends):
    torch.manual_seed(0)
    model = accelerate_model(SmallNet(), backends=["WRONG", "PYTORCH"])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        _train(model, 3)
    messages = _accel_warnings(record)
    assert len(messages) == 1 and "WRONG" in messages[0] and "check" in messages[0]
    assert active_backend(model) == "PYTORCH"
    # The check ran eager next to the candidate, yet BN saw each step exactly once.
    assert int(model.module.bn.num_batches_tracked) == 3


def test_backend_failing_mid_training_redoes_the_step_once(fault_backends):
    torch.manual_seed(0)
    reference = SmallNet()
    model = accelerate_model(copy.deepcopy(reference), backends=["FLAKY"])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        torch.manual_seed(1)
        losses = _train(model, 6)
    messages = _accel_warnings(record)
    assert len(messages) == 1 and "FLAKY" in messages[0] and "run" in messages[0]
    assert fault_backends["flaky"] == 4  # dropped for good: never called again
    assert int(model.module.bn.num_batches_tracked) == 6
    torch.manual_seed(1)
    expected = _train(reference, 6)  # same RNG draws (dropout) and same BN updates as eager
    assert losses == pytest.approx(expected, rel=1e-5)


def test_input_errors_are_the_users_and_keep_the_backend(fault_backends):
    model = accelerate_model(SmallNet(), backends=["FLAKY"])
    _train(model, 1)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="shapes"):
            model(torch.randn(4, 5))
    assert _accel_warnings(record) == []
    assert active_backend(model) == "FLAKY"


def test_eval_uses_eval_semantics_and_matches_eager_eval():
    torch.manual_seed(0)
    plain = SmallNet()
    fast = accelerate_model(copy.deepcopy(plain), backends=["PYTORCH"])
    torch.manual_seed(1)
    _train(fast, 3)
    torch.manual_seed(1)
    _train(plain, 3)
    fast.eval()
    plain.eval()
    x, _ = _batch(5, seed=9)
    before = fast.module.bn.running_mean.clone()
    torch.testing.assert_close(fast(x), plain(x), rtol=0, atol=0)
    torch.testing.assert_close(fast(x), fast(x), rtol=0, atol=0)  # dropout off
    assert torch.equal(before, fast.module.bn.running_mean)  # eval does not move BN stats


def test_compile_backend_follows_mode_dtype_and_submodule_changes():
    torch.manual_seed(0)
    model = accelerate_model(SmallNet(d_in=4, hidden=8), backends=["COMPILE"])
    x = torch.randn(6, 4)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model(x).sum().backward()
    assert _accel_warnings(record) == [] and active_backend(model) == "COMPILE"
    assert int(model.module.bn.num_batches_tracked) == 1
    model.eval()
    eager = SmallNet(d_in=4, hidden=8)
    eager.load_state_dict(model.state_dict())
    eager.eval()
    torch.testing.assert_close(model(x), eager(x), rtol=1e-4, atol=1e-5)
    model.module.head = nn.Linear(8, 5)
    assert model(x).shape == (6, 5)
    model.double()
    assert model(x.double()).dtype == torch.float64
    assert active_backend(model) == "COMPILE"


def test_every_compiled_model_in_a_process_gets_its_own_graphs():
    # Dynamo's recompile budget and its automatic dynamic sizes are per code object: when
    # all models shared one frame, the second model (another batch size) was compiled with
    # symbolic sizes, and the models past the budget ran eager. Budget 1 shows both at once.
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    config = torch._dynamo.config
    limit = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    with config.patch(**{limit: 1}):  # (newer torch names it so, older one cache_size_limit)
        for batch, width in [(4, 8), (6, 10), (5, 12)]:
            model = accelerate_model(SmallNet(d_in=width, hidden=8), backends=["COMPILE"])
            model(torch.randn(batch, width)).sum().backward()
            assert active_backend(model) == "COMPILE"
        assert counters["stats"]["unique_graphs"] == 3
    torch._dynamo.reset()


def test_decorated_model_runs_in_a_spawned_process():
    net = DecoratedNet()
    net.eval()
    x = torch.randn(3, 8)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        out = pool.apply(run_model, (net, x))
    torch.testing.assert_close(out, net(x))


def test_engine_state_survives_pickling_without_compiled_artifacts():
    model = accelerate_model(SmallNet(), backends=["RAMMER", "PYTORCH"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AccelerationWarning)
        _train(model, 1)
    clone = pickle.loads(pickle.dumps(model))
    assert "RAMMER" in engine_of(clone).dropped
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        _train(clone, 1)
    assert _accel_warnings(record) == []  # a dropped backend is not retried


@pytest.mark.slow
def test_compile_on_a_cnn_with_bias_before_batchnorm_and_bf16_autocast():
    torch.manual_seed(0)
    cnn = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(),
        nn.Linear(8 * 8 * 8, 4),
    )  # fmt: skip
    for kwargs in ({}, {"autocast": "bf16"}):
        model = accelerate_model(copy.deepcopy(cnn), backends=["COMPILE"], **kwargs)
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            opt = torch.optim.SGD(model.parameters(), lr=0.05)
            x, y = torch.randn(16, 3, 8, 8), torch.randint(0, 4, (16,))
            losses = []
            for _ in range(5):
                loss = nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        assert _accel_warnings(record) == [], kwargs
        assert active_backend(model) == "COMPILE" and losses[-1] < losses[0]


class _FailsInBackward(torch.autograd.Function):
    """Identity whose backward raises from its ``fail_from``-th call on."""

    calls = 0
    fail_from = 4

    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        _FailsInBackward.calls += 1
        if _FailsInBackward.calls >= _FailsInBackward.fail_from:
            raise RuntimeError("backward kernel failed")
        return grad


@pytest.fixture
def backward_failing_backend():
    """A backend computing eager's numbers whose backward fails from the 4th step on."""
    _FailsInBackward.calls = 0

    def build(fn, ctx):
        return lambda *args, **kwargs: _FailsInBackward.apply(fn(*args, **kwargs))

    register_backend("BWFAIL", build)
    yield
    unregister_backend("BWFAIL")


def test_fallback_warnings_come_in_order_and_name_the_backend_that_runs(fault_backends):
    model = accelerate_model(SmallNet(), backends=["BROKEN", "WRONG", "PYTORCH"])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        _train(model, 2)
    got = _accel_warnings(record)
    assert len(got) == 2
    assert "'BROKEN' dropped" in got[0] and "'WRONG' dropped" in got[1]
    assert all(w.endswith("continuing with 'PYTORCH'") for w in got), got


def test_backend_failing_in_backward_is_dropped_and_the_step_redone_by_the_trainer(
    backward_failing_backend,
):
    from tests.common.world import blobs, make_trainer

    def run(backends: list[str]) -> tuple[nn.Module, list[str]]:
        torch.manual_seed(0)
        model = accelerate_model(SmallNet(), backends=backends)
        trainer = make_trainer(model, lr=0.1, seed=1)
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            trainer.train(blobs(n=48), num_epochs=2, per_device_batch_size=8)
        assert trainer.state.global_step == 12
        return model, _accel_warnings(record)

    failed, got = run(["BWFAIL", "PYTORCH"])
    assert len(got) == 1 and "'BWFAIL' dropped (failed at backward" in got[0], got
    assert active_backend(failed) == "PYTORCH"
    eager, none = run(["PYTORCH"])
    assert none == []
    # The failed step was undone (BatchNorm statistics, RNG) and redone eagerly: the run is
    # bitwise the eager one, and BatchNorm counted each of the 12 steps once.
    assert int(failed.module.bn.num_batches_tracked) == 12
    for (key, a), b in zip(failed.state_dict().items(), eager.state_dict().values()):
        assert torch.equal(a, b), key


def test_recover_backward_in_a_hand_written_loop(backward_failing_backend):
    torch.manual_seed(0)
    model = accelerate_model(SmallNet(), backends=["BWFAIL", "PYTORCH"])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for step in range(6):
            x, y = _batch(seed=step)
            try:
                nn.functional.cross_entropy(model(x), y).backward()
            except RuntimeError as exc:
                with recover_backward(model, exc):
                    opt.zero_grad()
                    nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad()
    assert len(_accel_warnings(record)) == 1 and active_backend(model) == "PYTORCH"
    assert int(model.module.bn.num_batches_tracked) == 6
    # A failure with no accelerated backend to blame is raised again, untouched.
    error = RuntimeError("the user's own")
    with pytest.raises(RuntimeError, match="the user's own"), recover_backward(model, error):
        pass


def test_hooks_added_after_compiling_are_honoured():
    torch.manual_seed(0)
    model = accelerate_model(SmallNet(), backends=["COMPILE"])
    model.eval()
    x, _ = _batch()
    first = model(x)
    seen: list[str] = []
    handle = model.module.head.register_forward_hook(lambda m, i, o: o * 0)
    pre = model.module.fc.register_forward_pre_hook(lambda m, i: seen.append("fc"))
    assert torch.equal(model(x), torch.zeros_like(first)), "an output hook changes the result"
    assert seen == ["fc"]
    handle.remove()
    pre.remove()
    torch.testing.assert_close(model(x), first)
    assert seen == ["fc"] and active_backend(model) == "COMPILE"


class _CoarseInBf16(nn.Module):
    """A linear layer whose output passes through ``(h + 128) - 128``: exact in fp32, but
    under bf16 autocast rounded to steps of 1 (bf16 spacing at 128), far more than the
    first check's bound, with gradients unchanged (the offset's derivative is 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(64, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        return (h + 128.0) - 128.0


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return torch.randn(256, 64, generator=g), torch.randint(0, 32, (256,), generator=g)


def _first_steps(model: nn.Module) -> list[str]:
    x, y = _inputs()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(2):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return _accel_warnings(record)


def test_under_autocast_a_backend_as_accurate_as_eager_passes_the_second_check() -> None:
    def build_exact(fn, ctx):  # computes in full precision: entrywise far from eager bf16
        return getattr(fn, "full_precision", fn)  # the raw forward has it under autocast

    register_backend("EXACT", build_exact)
    try:
        torch.manual_seed(0)
        base = _CoarseInBf16()
        x = _inputs()[0]
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            coarse_out = base(x).float()
        with torch.no_grad():  # the first check alone rejects full precision against it
            assert _mismatch(base(x), coarse_out, 5e-2, 1e-5) is not None
        plain = accelerate_model(copy.deepcopy(base), backends=["EXACT"])
        assert _first_steps(plain) == [] and active_backend(plain) == "EXACT"
        coarse = accelerate_model(copy.deepcopy(base), backends=["EXACT"], autocast="bf16")
        assert _first_steps(coarse) == [] and active_backend(coarse) == "EXACT"
    finally:
        unregister_backend("EXACT")


def test_under_autocast_a_wrong_backend_still_fails_the_second_check(fault_backends) -> None:
    torch.manual_seed(0)  # a layer bf16 computes well: a wrong result is not rounding
    model = accelerate_model(nn.Linear(64, 32), backends=["WRONG"], autocast="bf16")
    messages = _first_steps(model)
    assert active_backend(model) == "PYTORCH"
    assert len(messages) == 1 and "against full precision too: output 0" in messages[0]


def test_rounding_excess_accepts_rounding_noise_and_rejects_a_scaled_result() -> None:

    g = torch.Generator().manual_seed(0)
    exact = torch.randn(10_000, generator=g)
    eager = exact + 0.1 * torch.randn(10_000, generator=g)  # two low-precision results,
    other = exact + 0.1 * torch.randn(10_000, generator=g)  # each off by its own rounding
    assert _mismatch(other, eager, 5e-2, 1e-5) is not None  # the first check rejects it
    assert _rounding_excess(other, eager, exact, 1e-5) < 0
    assert _rounding_excess(exact * 1.5, eager, exact, 1e-5) > 0
    assert _rounding_excess(exact[:10], eager, exact, 1e-5) == float("inf")
    assert _rounding_excess(other * float("nan"), eager, exact, 1e-5) == float("inf")


def test_a_decorated_class_may_call_itself_in_init(fault_backends):
    """Shape inference by a dummy forward in ``__init__`` (common in CNNs): the forward runs
    eagerly until the engine is attached, then the backends start with their check. It was
    a ``KeyError: '_scramjet_engine'``."""

    @accelerate_model(backends=["WRONG"])
    class Inferred(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)
            with torch.no_grad():
                features = self(torch.zeros(1, 3, 8, 8), features_only=True).shape[1]
            self.head = nn.Linear(features, 2)

        def forward(self, x: torch.Tensor, features_only: bool = False) -> torch.Tensor:
            h = self.conv(x).flatten(1)
            return h if features_only else self.head(h)

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        net = Inferred()
        assert not _accel_warnings(record), "nothing is tried before the engine exists"
        assert net.head.in_features == 4 * 6 * 6
        out = net(torch.randn(2, 3, 8, 8))
    assert out.shape == (2, 2)
    assert len(_accel_warnings(record)) == 1 and active_backend(net) == "PYTORCH"


def test_acceleration_and_cache_warnings_point_at_the_users_line() -> None:
    """A dropped backend and a cache that spills warn from the user's own call (they
    pointed inside scramjet, so users could not filter them by their module)."""
    model = accelerate_model(torch.nn.Linear(2, 1), backends=["RAMMER", "PYTORCH"])
    with pytest.warns(AccelerationWarning, match="RAMMER") as record:
        model(torch.ones(3, 2))
    assert [Path(w.filename).name for w in record] == [Path(__file__).name]
    with pytest.warns(UserWarning, match="cannot hold the cache index") as record:
        CachedDataset([torch.ones(2), torch.zeros(2)], max_memory_size=10)
    assert {Path(w.filename).name for w in record} == {Path(__file__).name}


def test_an_empty_backend_list_is_refused_with_the_choices() -> None:
    # it silently meant the device's default (COMPILE on CUDA), not "no acceleration"
    with pytest.raises(ValueError, match=r"backends=\[\] names no backend.*\['PYTORCH'\]"):
        accelerate_model(torch.nn.Linear(2, 1), backends=[])


class _CountsByAssignment(nn.Module):
    """Keeps a running count by assigning a new tensor to its buffer (not in place)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.register_buffer("seen", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen = self.seen + x.shape[0]
        return self.lin(x)


def test_a_buffer_the_forward_reassigns_moves_once_in_the_checked_first_call() -> None:
    register_backend("SAME", lambda fn, ctx: fn)
    try:
        model = _CountsByAssignment()
        original = model.seen
        accelerated = accelerate_model(model, backends=["SAME"])
        accelerated(torch.randn(4, 3)).sum().backward()  # eager, trial and caller's forward
        assert float(model.seen) == 4.0
        assert model.seen is not original or float(original) == 4.0
        accelerated(torch.randn(4, 3)).sum().backward()
        assert float(model.seen) == 8.0
    finally:
        unregister_backend("SAME")


def test_recovery_from_a_failed_backward_puts_back_a_reassigned_buffer(
    backward_failing_backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Backward call 1 is the check's gradient trial; call 2, the user's, fails.
    monkeypatch.setattr(_FailsInBackward, "fail_from", 2)
    model = accelerate_model(_CountsByAssignment(), backends=["BWFAIL", "PYTORCH"])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        try:
            model(torch.randn(4, 3)).sum().backward()
        except RuntimeError as exc:
            with recover_backward(model, exc):
                model(torch.randn(4, 3)).sum().backward()
    assert "failed at backward" in _accel_warnings(record)[0]
    assert active_backend(model) == "PYTORCH"
    assert float(model.module.seen) == 4.0  # the failed forward's count was undone
