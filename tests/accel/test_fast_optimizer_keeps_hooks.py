"""fast_optimizer keeps the hooks the user registered on the optimizer it rebuilds."""

from __future__ import annotations

from typing import Any

import torch

from scramjet.accel import fast_optimizer


def _model_and_optimizer() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def _step(model: torch.nn.Module, opt: torch.optim.Optimizer) -> None:
    opt.zero_grad()
    model(torch.randn(8, 4)).pow(2).sum().backward()
    opt.step()


def test_step_hooks_run_after_wrapping_in_registration_order() -> None:
    model, opt = _model_and_optimizer()
    calls: list[tuple[str, int]] = []
    opt.register_step_pre_hook(lambda o, a, k: calls.append(("pre", id(o))))
    opt.register_step_post_hook(lambda o, a, k: calls.append(("post", id(o))))
    opt.register_step_pre_hook(lambda o, a, k: calls.append(("pre2", id(o))))
    fast = fast_optimizer(opt)
    _step(model, fast)
    # The hooks see the optimizer that stepped, in the order they were registered.
    assert calls == [("pre", id(fast)), ("pre2", id(fast)), ("post", id(fast))]


def test_handles_from_before_wrapping_still_remove_the_hook() -> None:
    model, opt = _model_and_optimizer()
    calls: list[str] = []
    handle = opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    fast = fast_optimizer(opt)
    _step(model, fast)
    handle.remove()
    _step(model, fast)
    assert calls == ["pre"]


def test_state_dict_hooks_run_after_wrapping() -> None:
    model, opt = _model_and_optimizer()
    calls: list[str] = []

    def save_post(o: torch.optim.Optimizer, sd: dict[str, Any]) -> dict[str, Any]:
        calls.append("save-post")
        sd["user_extra"] = 7
        return sd

    def load_pre(o: torch.optim.Optimizer, sd: dict[str, Any]) -> dict[str, Any]:
        calls.append("load-pre")
        sd = dict(sd)
        assert sd.pop("user_extra") == 7
        return sd

    opt.register_state_dict_pre_hook(lambda o: calls.append("save-pre"))
    opt.register_state_dict_post_hook(save_post)
    opt.register_load_state_dict_pre_hook(load_pre)
    opt.register_load_state_dict_post_hook(lambda o: calls.append("load-post"))
    fast = fast_optimizer(opt)
    _step(model, fast)
    calls.clear()
    state = fast.state_dict()
    assert state["user_extra"] == 7
    fast.load_state_dict(state)
    assert calls == ["save-pre", "save-post", "load-pre", "load-post"]
