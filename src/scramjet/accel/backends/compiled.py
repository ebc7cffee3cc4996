"""COMPILE backend: ``torch.compile`` (TorchDynamo + Inductor).

Dynamo guards on the module's ``training`` flag, parameter dtypes/devices, submodule
identity and (switched on here) the modules' hook dicts, so train/eval switches, ``.to()``
moves, submodule replacement and hooks added or removed later recompile instead of running
a stale graph. Int attributes of modules are graph inputs (switched on here), so a counter
the forward advances does not recompile every call. ``fallback_random`` makes dropout draw from the same
generator as eager, so the first-step check can compare outputs exactly and training stays
reproducible under ``torch.manual_seed``.
"""

from __future__ import annotations

import itertools
import types
from typing import Any

import torch

from scramjet.accel.backends import BuildContext, ForwardFn


def build_compile(forward_fn: ForwardFn, ctx: BuildContext) -> ForwardFn:
    """Compile ``forward_fn`` with ``torch.compile``.

    Options read from ``ctx.options``: ``compile_mode`` (``None``, ``"default"``,
    ``"reduce-overhead"``, ``"max-autotune"``), ``cuda_graphs`` (bool; selects
    ``"reduce-overhead"`` on CUDA, which captures CUDA graphs for static shapes) and
    ``dynamic`` (passed through).

    Raises:
        RuntimeError: ``torch.compile`` is unavailable in this torch build.
    """
    if not hasattr(torch, "compile"):
        raise RuntimeError(f"torch {torch.__version__} has no torch.compile; needs torch>=2.0")
    mode = ctx.options.get("compile_mode")
    if ctx.options.get("cuda_graphs") and ctx.device.type == "cuda":
        mode = "reduce-overhead"
    dynamic = ctx.options.get("dynamic")
    # torch.compile takes ``mode`` or ``options``, not both: a mode is passed as the Inductor
    # options it stands for, so that ``fallback_random`` holds in every mode (without it a
    # model with dropout fails the first-step check and COMPILE is dropped).
    options: dict[str, Any] = {"fallback_random": True}
    if mode not in (None, "default"):
        from torch._inductor import list_mode_options

        options = {**list_mode_options(mode, dynamic), **options}  # an unknown mode raises
    compiled = torch.compile(_own_frame(forward_fn), dynamic=dynamic, options=options)
    config: Any = torch._dynamo.config
    # Set only around this model's calls (about 3 us each), where the torch has them:
    # - by default Dynamo does not guard on module hook dicts, so a forward hook added (or
    #   removed) after the first compile would be silently ignored (or kept);
    # - by default an int attribute of a module is a constant of the graph, so a counter
    #   the forward advances (``self.calls += 1``) recompiled at every call until Dynamo's
    #   limit of 8, after which the model ran eagerly under the COMPILE name. Unspecialized,
    #   it compiles once more as a graph input and keeps counting.
    # - at Dynamo's recompile limit the frame ran eagerly, still under the COMPILE name:
    #   failing there instead lets the engine drop COMPILE with a warning naming the cause.
    wanted = {
        "skip_nnmodule_hook_guards": False,
        "allow_unspec_int_on_nn_module": True,
        "fail_on_recompile_limit_hit": True,
    }
    flags = {name: value for name, value in wanted.items() if hasattr(config, name)}
    if not flags:
        return compiled

    def run(*args: Any, **kwargs: Any) -> Any:
        previous = {name: getattr(config, name) for name in flags}
        if previous == flags:
            return _explained(compiled, args, kwargs)
        for name, value in flags.items():
            setattr(config, name, value)
        try:
            return _explained(compiled, args, kwargs)
        finally:
            for name, value in previous.items():
                setattr(config, name, value)

    return run


def _explained(compiled: ForwardFn, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        return compiled(*args, **kwargs)
    except Exception as error:
        if type(error).__name__ != "FailOnRecompileLimitHit":
            raise
        limit = getattr(torch._dynamo.config, "recompile_limit", "its")
        raise RuntimeError(
            f"torch.compile reached Dynamo's recompile limit ({limit} graphs of this "
            "model's forward): a value that changes from call to call (a Python string, "
            "float or list passed to forward, or a module attribute) is compiled as a "
            "constant, so each new value compiles again. Dynamo's log line 'last reason' "
            "names it; pass it as a tensor, or raise torch._dynamo.config.recompile_limit"
        ) from error


_frames = itertools.count()


def _own_frame(forward_fn: ForwardFn) -> ForwardFn:
    """``forward_fn`` behind a function whose code object belongs to this model alone.

    Dynamo keeps its compiled graphs, its recompile budget and its record of which sizes
    changed per code object (the record by file, line and name). Every accelerated model's
    forward is the same closure (or ``nn.Module.__call__``), so without this the second
    model in a process recompiled the first one's frame: a different batch size there made
    Dynamo compile it with symbolic sizes (slower kernels: bf16 + COMPILE on a ResNet fell
    from 3.1x to 1.2x fp32 eager on a GPU), and after eight models the limit left the
    rest eager.
    """

    def forward(*args: Any, **kwargs: Any) -> Any:
        return forward_fn(*args, **kwargs)

    name = f"scramjet_forward_{next(_frames)}"
    code = forward.__code__.replace(co_name=name)  # (co_qualname, 3.11+, is not guarded)
    return types.FunctionType(code, forward.__globals__, name, None, forward.__closure__)
