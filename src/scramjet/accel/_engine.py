"""The safe-fallback engine behind :func:`scramjet.accel.accelerate_model`.

One engine per model instance. It keeps the user's backends in priority order, always ending
in ``PYTORCH`` (eager). On the first call in each mode (train / inference) a non-eager backend
runs next to eager on the same inputs, RNG state and buffers; outputs and parameter gradients
must agree within a stated tolerance, then the backend is committed for that mode. Buffers
and RNG state are restored between the two runs, so BatchNorm statistics move once per step.
A backend that fails to build, fails the check or raises later is dropped for good with one
warning, and the same call is redone by the next backend from the restored state. A failure
in the backward pass cannot be redone from inside the forward call: the Trainer (or a
hand-written loop, through :func:`scramjet.accel.recover_backward`) undoes the forward's
side effects with :meth:`Engine.begin_backward_recovery`, redoes the step on the next
backend and then drops the failed one.
"""

from __future__ import annotations

import copy
import enum
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
from torch.utils._pytree import tree_flatten, tree_map

from scramjet.accel._compare import (
    _exact_problem,
    _finite_abs_max,
    _float_leaves,
    _mismatch,
    _rounding_excess,
)
from scramjet.accel.backends import BuildContext, ForwardFn, available_backends, get_builder
from scramjet.runtime.stacklevel import user_stacklevel

EAGER = "PYTORCH"
AUTO = "AUTO"
#: How much of a dropped backend's error its warning quotes (room for an install hint).
_WARNING_CHARS = 1000


class AccelerationWarning(UserWarning):
    """Emitted once when a backend is dropped, or when an option cannot apply here."""


#: Code a warning should not point at: scramjet's own and torch's (``Module.__call__``).
@dataclass(frozen=True)
class Tolerance:
    """Agreement required between a backend and eager on its first step.

    An output ``c`` matches the eager output ``e`` when ``max|c - e| <= atol + rtol * max|e|``.
    Parameter gradients are taken of a fixed random projection of the outputs; each must
    satisfy ``max|g_c - g_e| <= atol + rtol * G``, where ``G`` is the largest eager gradient
    entry over all parameters (float noise scales with the model's gradients, not with a
    tensor whose gradient is ~0 by construction).

    Attributes:
        rtol: relative part, as a fraction of the largest eager magnitude (default 1e-3).
        atol: absolute part (default 1e-5).
        low_precision_rtol: ``rtol`` used when an output is fp16/bf16 or autocast is on.

    With autocast on, a backend that fails this check gets a second one against the same
    eager forward in full precision: each output and gradient passes when its L2 error
    against full precision is at most twice eager-with-autocast's own error plus 1 % of the
    full-precision norm. Fused kernels round in another order than eager ones, which in a
    deep network moves single gradient entries by more than the first bound; a wrong
    backend's error is not explained by rounding and still fails.
    """

    rtol: float = 1e-3
    atol: float = 1e-5
    low_precision_rtol: float = 5e-2

    def __post_init__(self) -> None:
        for name in ("rtol", "atol", "low_precision_rtol"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                raise ValueError(
                    f"Tolerance({name}={value!r}): a bound must be a number >= 0 (a negative "
                    f"one fails every backend's check); e.g. Tolerance(rtol=1e-3, atol=1e-5)"
                )


class CheckFailed(RuntimeError):
    """A backend's first step disagreed with eager beyond the tolerance."""


class _Failed(Exception):
    """A backend failed at ``phase`` (build, check or run) with ``error``."""

    def __init__(self, phase: str, error: Exception) -> None:
        super().__init__(phase, error)
        self.phase, self.error = phase, error


class _Snapshot:
    """Buffers and RNG state (and, for the check's trial runs, Python attributes), so a
    trial or failed run can be undone."""

    def __init__(self, module: torch.nn.Module, attributes: _Attributes | None = None) -> None:
        self.module = module
        self.attributes = attributes
        self.buffers = [(n, b, b.detach().clone()) for n, b in module.named_buffers()]
        self.cpu_rng = torch.get_rng_state()
        # torch.cuda.is_initialized is unannotated; it returns a bool.
        cuda_initialized = cast("Callable[[], bool]", torch.cuda.is_initialized)
        self.cuda_rng = torch.cuda.get_rng_state_all() if cuda_initialized() else None

    def restore(self) -> None:
        with torch.no_grad():
            for name, original, saved in self.buffers:
                original.copy_(saved)
                owner, _, attr = name.rpartition(".")
                holder = self.module.get_submodule(owner)
                if holder._buffers.get(attr) is not original:
                    # The forward assigned a new tensor (``self.count = self.count + 1``)
                    # instead of updating in place: the saved one goes back.
                    holder._buffers[attr] = original
        torch.set_rng_state(self.cpu_rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state_all(self.cuda_rng)
        if self.attributes is not None:
            self.attributes.restore()


_MISSING = object()


class _Attributes:
    """The public attributes of every submodule (``self.calls += 1``, ``self.seen = ...``),
    put back between the check's trial runs so a forward's Python counters advance once per
    call. Only rebound values are put back: a list the forward appends to stays changed.
    A layer's own ``forward`` is not state of a call: sparse backprop rebinds it when its
    first backward (the eager trial's) finds the heads, and that choice must stay."""

    def __init__(self, module: torch.nn.Module) -> None:
        skip = ("training", "forward")
        self.saved = [
            (m.__dict__, {k: v for k, v in m.__dict__.items() if k[0] != "_" and k not in skip})
            for m in module.modules()
        ]

    def restore(self) -> None:
        for now, before in self.saved:
            for key, value in before.items():
                if now.get(key, _MISSING) is not value:
                    now[key] = value


class _Inputs:
    """The call's tensor inputs as they were before it, put back if a trial run changed them.

    A forward may change its input in place (``x.sub_(mean)``, ``x /= 255``). The checked
    call runs it up to four times (eager, the backend's gradient trial, the backend again);
    without this each run would start from the previous one's result. Only a tensor whose
    version counter moved is written back, so inputs that are part of an autograd graph and
    were not changed are never touched (inference tensors have no counter: inside
    ``torch.inference_mode`` they are always written back).
    """

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        leaves, _ = tree_flatten((args, kwargs))
        self.saved: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.versions: list[int | None] = []
        seen: set[int] = set()
        for t in leaves:
            if isinstance(t, torch.Tensor) and id(t) not in seen:
                seen.add(id(t))
                self.saved.append((t, t.detach().clone()))
                self.versions.append(_version(t))
        # Objects a forward may change (a Hugging Face key/value cache that each call
        # extends, a list it appends to): the trial runs get deep copies of them, and only
        # the call whose output is returned sees the caller's own objects.
        self.mutable = any(_may_change(a) for a in args) or any(
            _may_change(v) for v in kwargs.values()
        )
        self.copy: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        self.copyable = True
        self.carry_graph = any(live.requires_grad for live, _ in self.saved)
        if self.mutable:
            try:
                self.copy = self._copied(args, kwargs)
            except Exception:  # a lock, a file, a tensor inside an autograd graph ...
                self.copyable = False

    def _copied(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        # Tensors passed directly are shared (restore() puts them back); those held inside
        # an object are copied with it.
        memo: dict[int, Any] = {id(live): live for live, _ in self.saved}
        return copy.deepcopy((args, kwargs), memo)

    def for_trial(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The inputs of a trial run: fresh copies of the objects a forward may change, and
        tensors that carry a graph cut from it.

        A trial's gradients are taken of the module's parameters with the graph freed
        behind them. An input computed from a parameter the module shares (a tied
        embedding used before it) would let them run into the caller's graph and free it
        there, so the trials see those inputs detached: their gradients cover the
        module's own computation, which is what is compared."""
        if self.mutable:
            fresh, self.copy = self.copy, None
            args, kwargs = fresh if fresh is not None else self._copied(args, kwargs)
        if not self.carry_graph:
            return args, kwargs
        cut = tree_map(
            lambda t: t.detach() if isinstance(t, torch.Tensor) and t.requires_grad else t,
            (args, kwargs),
        )
        return cast("tuple[tuple[Any, ...], dict[str, Any]]", cut)

    def restore(self) -> None:
        with torch.no_grad():
            for k, (live, saved) in enumerate(self.saved):
                version = self.versions[k]
                if version is None and not torch.is_inference_mode_enabled():
                    continue  # an inference tensor cannot have changed outside that mode
                if version is None or _version(live) != version:
                    live.copy_(saved)
                    self.versions[k] = _version(live)


_IMMUTABLE = (
    int,
    float,
    complex,
    str,
    bytes,
    type(None),
    range,
    slice,
    type,
    enum.Enum,
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
    types.FunctionType,
    types.BuiltinFunctionType,
)


def _may_change(value: Any) -> bool:
    """Whether a forward could change ``value`` in a way ``_Inputs.restore`` cannot undo."""
    if isinstance(value, (torch.Tensor, *_IMMUTABLE)):
        return False
    if isinstance(value, tuple):  # named tuples too
        return any(_may_change(v) for v in value)
    return True


def _version(t: torch.Tensor) -> int | None:
    """The tensor's in-place version counter (None for inference tensors, which have none)."""
    return None if t.is_inference() else int(t._version)


def _projected_grads(out: Any, params: list[Any], keep_graph: bool) -> list[torch.Tensor | None]:
    leaves = [t for t in _float_leaves(out) if t.requires_grad]
    if not leaves or not params:
        return []
    gen = torch.Generator(device=leaves[0].device).manual_seed(1234)
    total = torch.stack(
        [(t.float() * torch.randn(t.shape, generator=gen, device=t.device)).sum() for t in leaves]
    ).sum()
    grads = torch.autograd.grad(total, params, allow_unused=True, retain_graph=keep_graph)
    return list(grads)


def _device_of(module: torch.nn.Module) -> torch.device:
    for p in module.parameters():
        return p.device
    for b in module.buffers():
        return b.device
    return torch.device("cpu")


def default_backends(device: torch.device) -> list[str]:
    """The measured per-device default used for ``backends=None`` / ``"AUTO"``.

    CUDA: ``COMPILE`` then eager (Inductor kernels, bf16-friendly). CPU and others: eager
    only; on a 2-core CPU ``torch.compile`` paid back its compile time only for long runs of
    some models (figures in docs/bench/accel.md), so it stays an explicit choice there.
    """
    if device.type == "cuda":
        return ["COMPILE", EAGER]
    return [EAGER]


def _check_arguments(backends: list[Any] | None, options: dict[str, Any], tolerance: Any) -> None:
    """Refuse, when the model is accelerated, what would otherwise only cost a backend at
    its first call (a mistyped ``compile_mode`` dropped ``COMPILE`` with a warning)."""
    for name in backends or []:
        if not isinstance(name, str):
            raise TypeError(
                f"backends holds {name!r} ({type(name).__name__}); expected backend names "
                f"such as ['COMPILE', 'PYTORCH'] (choices: {[*available_backends(), AUTO]})"
            )
    if tolerance is not None and not isinstance(tolerance, Tolerance):
        raise TypeError(
            f"tolerance must be a scramjet.accel.Tolerance, got {tolerance!r}; pass "
            "tolerance=Tolerance(rtol=1e-3, atol=1e-5) (or leave it out for those defaults)"
        )
    for flag in ("channels_last", "cuda_graphs", "patch_backprop"):
        value = options.get(flag, False)
        config = flag == "patch_backprop" and type(value).__name__ == "SparseBackpropConfig"
        if isinstance(value, bool | np.bool_) or config:
            continue
        also = " or a SparseBackpropConfig" if flag == "patch_backprop" else ""
        raise TypeError(
            f"{flag} must be True or False{also}; received {type(value).__name__} {value!r}, "
            f"which is not read as a yes/no (the string 'no' is true in Python)"
        )
    mode = options.get("compile_mode")
    if mode not in (None, "default"):
        from torch._inductor import list_mode_options

        try:
            list_mode_options(mode)
        except Exception as exc:
            raise ValueError(
                f"compile_mode={mode!r} is not a torch.compile mode ({exc}); pass one of "
                "those names, or None for torch.compile's default"
            ) from None


class Engine:
    """Per-instance backend state machine (see module docstring)."""

    def __init__(
        self,
        backends: list[str] | None,
        options: dict[str, Any] | None = None,
        tolerance: Tolerance | None = None,
    ) -> None:
        _check_arguments(backends, options or {}, tolerance)
        self.requested = None if backends is None else [b.upper() for b in backends]
        for name in self.requested or []:
            if name != AUTO:
                get_builder(name)  # raises ValueError listing the valid names
        self.options = dict(options or {})
        self.tolerance = tolerance or Tolerance()
        self.dropped: dict[str, str] = {}
        self._clear()

    def _clear(self) -> None:
        self.queue: list[str] | None = None
        self._auto_on: str | None = None  # the device type AUTO was resolved for
        self.fns: dict[str, ForwardFn] = {}
        self.verified: dict[str, set[tuple[bool, bool]]] = {}
        self._last_train: tuple[str, _Snapshot] | None = None
        self._suspended: tuple[str, int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Compiled callables do not pickle; they are rebuilt (and re-checked) on first use.
        return {
            "requested": self.requested,
            "options": {k: v for k, v in self.options.items() if k != "raw_module"},
            "tolerance": self.tolerance,
            "dropped": self.dropped,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._clear()

    @property
    def active(self) -> str | None:
        """The backend the next call will try first (None before the first call)."""
        return None if self.queue is None else self.queue[0]

    def _resolve(self, module: torch.nn.Module) -> list[str]:
        names: list[str] = []
        for name in self.requested or [AUTO]:
            expanded = [name]
            if name == AUTO:
                device = _device_of(module)
                self._auto_on, expanded = device.type, default_backends(device)
            names += [n for n in expanded if n not in names and n not in self.dropped]
        if EAGER not in names:
            names.append(EAGER)
        return names

    def reset(self) -> None:
        """Forget built backends and checks; the next call rebuilds and re-checks."""
        self._clear()

    def run(
        self,
        module: torch.nn.Module,
        raw: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """Run one forward call through the first working backend. With ``AUTO``, a model
        moved to another kind of device (``.cuda()`` after a first call on the CPU) has its
        backends chosen again for that device."""
        if self._auto_on is not None and _device_of(module).type != self._auto_on:
            self._clear()
        if self.queue is None:
            self.queue = self._resolve(module)
        return self._run_from(list(self.queue), module, raw, args, kwargs)

    def _run_from(
        self,
        names: list[str],
        module: torch.nn.Module,
        raw: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """Try ``names`` in order; drop the failed ones once a later one has succeeded.

        If every backend fails, eager included, the inputs or the model are at fault: the
        eager error is raised and no backend is dropped.
        """
        failures: list[tuple[str, str, Exception]] = []
        for name in names:
            if name == EAGER:
                out = raw(*args, **kwargs)
                self._last_train = None
            else:
                snap = _Snapshot(module) if module.training else None
                try:
                    out = self._attempt(name, module, raw, args, kwargs)
                except _Failed as failed:
                    if snap is not None:
                        snap.restore()
                    failures.append((name, failed.phase, failed.error))
                    continue
                # Kept until the next call: if this forward's backward fails, the step can
                # be undone and redone by the next backend (see recover_backward()).
                self._last_train = (name, snap) if snap is not None else None
            for failed_name, phase, error in failures:
                self._drop(failed_name, phase, error, name)
            return out
        raise AssertionError("unreachable: eager always ends the list")  # pragma: no cover

    def _attempt(
        self,
        name: str,
        module: torch.nn.Module,
        raw: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        phase = "build"
        try:
            fn = self.fns.get(name) or self._build(name, module, raw)
            mode = (module.training, torch.is_grad_enabled())
            if mode in self.verified.setdefault(name, set()):
                phase = "run"
                return fn(*args, **kwargs)
            phase = "check"
            out, checked = self._checked(name, fn, module, raw, args, kwargs)
            if checked:
                self.verified[name].add(mode)
            return out
        except Exception as exc:
            raise _Failed(phase, exc) from exc

    def begin_backward_recovery(self) -> str | None:
        """Undo the last training forward of a non-eager backend whose backward failed.

        Restores the buffers and RNG state from before that forward and takes the backend
        out of the queue, so the caller can redo the step (forward and backward) on the
        next backend. Returns the backend's name, or None when the last training forward
        ran eagerly (then the failure is not the backend's). Finish with
        :meth:`end_backward_recovery`.
        """
        last, self._last_train = self._last_train, None
        if last is None or self.queue is None or last[0] not in self.queue:
            return None
        name, snap = last
        snap.restore()
        self._suspended = (name, self.queue.index(name))
        self.queue.remove(name)
        return name

    def end_backward_recovery(self, error: BaseException, redone: bool) -> None:
        """Drop the suspended backend with one warning if the redo worked, else restore it."""
        if self._suspended is None or self.queue is None:
            return
        name, position = self._suspended
        self._suspended = None
        if redone:
            self.queue.insert(position, name)  # _drop removes it and says what runs next
            nxt = next((n for n in self.queue if n != name), EAGER)
            self._drop(name, "backward", error, nxt)
        else:  # the next backend failed too: the error is the user's, keep this backend
            self.queue.insert(position, name)

    def _build(self, name: str, module: torch.nn.Module, raw: Callable[..., Any]) -> ForwardFn:
        ctx = BuildContext(module=module, device=_device_of(module), options=self.options)
        fn = get_builder(name)(raw, ctx)
        self.fns[name] = fn
        return fn

    def _checked(
        self,
        name: str,
        fn: ForwardFn,
        module: torch.nn.Module,
        raw: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> tuple[Any, bool]:
        """The call's output, and whether the check ran (and passed) on it."""
        inputs = _Inputs(args, kwargs)
        if not inputs.copyable:
            # The trial runs would change the caller's objects and they cannot be copied:
            # eager runs this call, and the check waits for a call it can make.
            return raw(*args, **kwargs), False
        # Only the first call per mode is checked: the attributes are saved here, not on
        # every step (a walk over every submodule's attributes).
        snap = _Snapshot(module, _Attributes(module))
        try:
            return self._trials(name, fn, (module, raw), args, kwargs, inputs, snap), True
        except BaseException:
            inputs.restore()  # the next backend redoes the call on the caller's inputs
            if snap.attributes is not None:
                snap.attributes.restore()
            raise

    def _trials(
        self,
        name: str,
        fn: ForwardFn,
        model: tuple[torch.nn.Module, Callable[..., Any]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        inputs: _Inputs,
        snap: _Snapshot,
    ) -> Any:
        """Eager, then the backend, from the same buffers, RNG state, attributes and inputs
        (``snap``: taken before the call); compare."""
        module, raw = model
        params: list[torch.nn.Parameter] = [p for p in module.parameters() if p.requires_grad]
        want_grads = torch.is_grad_enabled()
        trial_args, trial_kwargs = inputs.for_trial(args, kwargs)
        ref = raw(*trial_args, **trial_kwargs)
        ref_grads = _projected_grads(ref, params, keep_graph=False) if want_grads else []
        snap.restore()
        inputs.restore()
        trial_args, trial_kwargs = inputs.for_trial(args, kwargs)
        out = fn(*trial_args, **trial_kwargs)
        # Compiled backwards may donate buffers, so a graph cannot be walked twice: the
        # gradient trial runs on its own forward and the state is restored once more before
        # the forward whose output the caller gets.
        got_grads = _projected_grads(out, params, keep_graph=False) if want_grads else []
        try:
            self._compare(name, ref, out, ref_grads, got_grads, params, module)
        except CheckFailed as failed:
            exact_fn = getattr(raw, "full_precision", None)
            if exact_fn is None:  # no autocast: nothing but the first check applies
                raise
            snap.restore()
            inputs.restore()
            trial_args, trial_kwargs = inputs.for_trial(args, kwargs)
            exact = exact_fn(*trial_args, **trial_kwargs)
            exact_grads = _projected_grads(exact, params, keep_graph=False) if want_grads else []
            self._compare_rounding(
                failed, (ref, ref_grads), (out, got_grads), (exact, exact_grads), params, module
            )
            want_grads = True  # the state moved again: rerun the caller's forward below
        if not want_grads and not inputs.mutable:
            return out
        snap.restore()
        inputs.restore()
        return fn(*args, **kwargs)

    def _compare_rounding(
        self,
        failed: CheckFailed,
        eager: tuple[Any, list[torch.Tensor | None]],
        backend: tuple[Any, list[torch.Tensor | None]],
        exact: tuple[Any, list[torch.Tensor | None]],
        params: list[torch.nn.Parameter],
        module: torch.nn.Module,
    ) -> None:
        """The second check under autocast (see :class:`Tolerance`); raises ``failed``,
        extended, when the backend's error is more than rounding explains."""
        exact_problem = _exact_problem(backend[0], eager[0], exact[0])
        if exact_problem is not None:
            raise CheckFailed(f"{failed}; against full precision too: {exact_problem}") from failed
        names = {id(p): n for n, p in module.named_parameters()}
        outputs = [_float_leaves(run[0]) for run in (backend, eager, exact)]
        if len({len(leaves) for leaves in outputs}) != 1:
            raise failed
        pairs = [(f"output {i}", t) for i, t in enumerate(zip(*outputs))]
        for p, b, e, f in zip(params, backend[1], eager[1], exact[1]):
            if b is None and e is None and f is None:
                continue
            if b is None or e is None or f is None:
                raise failed
            pairs.append((f"gradient of {names.get(id(p))!r}", (b, e, f)))
        for what, (b, e, f) in pairs:
            excess = _rounding_excess(b, e, f, self.tolerance.atol)
            if excess > 0:
                raise CheckFailed(
                    f"{failed}; against full precision too: {what} is off by more than "
                    f"twice eager's own low-precision error (by {excess:.3g})"
                ) from failed

    def _compare(
        self,
        name: str,
        ref: Any,
        out: Any,
        ref_grads: list[torch.Tensor | None],
        got_grads: list[torch.Tensor | None],
        params: list[torch.nn.Parameter],
        module: torch.nn.Module,
    ) -> None:
        tol = self.tolerance
        ref_leaves, got_leaves = _float_leaves(ref), _float_leaves(out)
        low = self.options.get("autocast") is not None or any(
            t.dtype in (torch.float16, torch.bfloat16) for t in ref_leaves
        )
        rtol = tol.low_precision_rtol if low else tol.rtol
        if len(ref_leaves) != len(got_leaves):
            raise CheckFailed(f"{name} returned {len(got_leaves)} tensors, eager {len(ref_leaves)}")
        for i, (c, e) in enumerate(zip(got_leaves, ref_leaves)):
            err = _mismatch(c, e, rtol, tol.atol)
            if err is not None:
                raise CheckFailed(f"output {i} differs from eager by {err:.3g} (rtol={rtol})")
        exact_problem = _exact_problem(out, ref)
        if exact_problem is not None:
            raise CheckFailed(exact_problem)
        names = {id(p): n for n, p in module.named_parameters()}
        # Each gradient is held to the scale of the largest eager gradient entry: a tensor
        # whose gradient is ~0 by construction (a bias before BatchNorm) only carries float
        # noise, which a per-tensor relative bound would reject.
        scale = max((_finite_abs_max(g) for g in ref_grads if g is not None), default=0.0)
        for p, ge, gc in zip(params, ref_grads, got_grads):
            if ge is None and gc is None:
                continue
            if ge is None or gc is None:
                raise CheckFailed(f"gradient of {names.get(id(p))!r} is missing in one run")
            err = _mismatch(gc, ge, rtol, tol.atol, scale)
            if err is not None:
                raise CheckFailed(
                    f"gradient of {names.get(id(p))!r} differs from eager by {err:.3g} "
                    f"(allowed {tol.atol:.1g} + {rtol:.1g} x {scale:.3g})"
                )

    def _drop(self, name: str, phase: str, exc: BaseException, nxt: str) -> None:
        if self.queue is not None and name in self.queue:
            self.queue.remove(name)
        self.fns.pop(name, None)
        self.verified.pop(name, None)
        self.dropped[name] = f"{phase}: {type(exc).__name__}: {exc}"
        text = str(exc)
        if len(text) > _WARNING_CHARS:  # a compiler's error can run to pages
            text = text[:_WARNING_CHARS] + " [...; the whole error is in engine_of(model).dropped]"
        warnings.warn(
            f"scramjet.accel: backend {name!r} dropped (failed at {phase}: "
            f"{type(exc).__name__}: {text}); continuing with {nxt!r}",
            AccelerationWarning,
            stacklevel=user_stacklevel(),
        )
