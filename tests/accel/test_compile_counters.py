"""A COMPILE model whose forward advances a Python counter keeps running compiled.

Dynamo made a module's int attribute a constant of the graph, so ``self.calls += 1``
failed the guard at every call: eight recompiles (seconds each on a CPU), then Dynamo's
limit ran the model eagerly while ``active_backend`` still said COMPILE. The backend now
lets int attributes be graph inputs: one more compile, then the counter just counts.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from scramjet.accel import AccelerationWarning, accelerate_model, active_backend


class Counting(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 3)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.fc(x) * 2


def test_a_counter_in_forward_neither_recompiles_every_call_nor_falls_back_to_eager() -> None:
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    fast = accelerate_model(Counting(), backends=["COMPILE"])
    plain = Counting()
    plain.load_state_dict(fast.state_dict())
    x = torch.randn(4, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccelerationWarning)  # no backend dropped
        for _ in range(12):
            out = fast(x)
            out.sum().backward()
    assert fast.module.calls == 12  # the counter advanced once per call
    assert active_backend(fast) == "COMPILE"
    # the first graph, and one with the counter as an input; 8 (the limit) before
    assert counters["stats"]["unique_graphs"] <= 3, dict(counters["stats"])
    torch.testing.assert_close(out, plain(x), rtol=1e-5, atol=1e-6)
    torch._dynamo.reset()


class Tagged(nn.Module):
    """A forward that takes a Python string: each new string is a new graph."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor, tag: str = "a") -> torch.Tensor:
        return self.fc(x) * len(tag)


def test_at_dynamos_recompile_limit_compile_is_dropped_by_name() -> None:
    # Dynamo runs a frame eagerly once it has compiled recompile_limit graphs of it; the
    # model used to go on under the COMPILE name. Now COMPILE is dropped, with the cause.
    # (Dynamo's own patch: pytest's monkeypatch deletes the config entry when undone.)
    torch._dynamo.reset()
    torch.manual_seed(0)
    fast = accelerate_model(Tagged(), backends=["COMPILE"])
    plain = Tagged()
    plain.load_state_dict(fast.state_dict())
    x = torch.randn(4, 8)
    with (
        warnings.catch_warnings(record=True) as caught,
        torch._dynamo.config.patch(recompile_limit=2),
    ):
        warnings.simplefilter("always", AccelerationWarning)
        outs = [fast(x, tag="t" * n) for n in range(1, 5)]
    assert active_backend(fast) == "PYTORCH"
    dropped = [str(w.message) for w in caught if issubclass(w.category, AccelerationWarning)]
    assert len(dropped) == 1 and "recompile limit (2 graphs" in dropped[0], dropped
    assert "torch._dynamo.config.recompile_limit" in dropped[0]
    for n, out in enumerate(outs, start=1):  # every call still returned the right values
        torch.testing.assert_close(out, plain(x, tag="t" * n), rtol=1e-5, atol=1e-6)
    torch._dynamo.reset()
