"""``accelerate_model``: the same model, run by the fastest backend that proves correct.

Three ways to use it::

    @accelerate_model(backends=["COMPILE"])          # class decorator -> subclass
    class Net(nn.Module): ...

    fast = accelerate_model(net, backends=["COMPILE"])  # instance -> AcceleratedModel
    fast = TrainingLearner(net, ["COMPILE"])              # the same, nebulgym's spelling

The class decorator never touches the user's class: it returns a subclass with the same
``__name__``, ``__qualname__`` and ``__module__`` that only overrides ``forward`` (so
``nn.Module.__call__`` still runs hooks) and ``__init__`` (to attach the engine). The
wrapper keeps ``state_dict`` keys identical to the wrapped module's (no ``module.`` prefix).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar, cast

import torch
from torch import nn
from torch.nn.parameter import is_lazy

from scramjet.accel._compare import map_output_tensors
from scramjet.accel._engine import Engine, Tolerance, _device_of
from scramjet.accel.extras import inputs_to_channels_last, resolve_autocast, to_channels_last
from scramjet.accel.sparse_backprop import (
    SparseBackpropConfig,
    apply_sparse_backprop,
    in_function_transform,
)
from scramjet.trainer.trainer import BACKWARD_RECOVERY

M = TypeVar("M", bound=nn.Module)
_ENGINE_ATTR = "_scramjet_engine"


_VIEW_HINT = (
    "scramjet.accel: with channels_last=True, convolution outputs are channels-last, and "
    ".view() cannot flatten them; use .reshape(...) or torch.flatten(...) in the model's "
    "forward, or pass channels_last=False"
)


def _channels_last_call(call: Callable[..., Any]) -> Callable[..., Any]:
    """``call`` on channels-last inputs; a ``.view()`` that the layout breaks says why."""

    def run(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = inputs_to_channels_last((args, kwargs))
        try:
            return call(*args, **kwargs)
        except RuntimeError as exc:
            if "view size is not compatible" not in str(exc):
                raise
            raise RuntimeError(f"{exc}\n{_VIEW_HINT}") from exc

    return run


def _to_fp32(value: Any) -> Any:
    """A floating-point tensor narrower than fp32 (fp16, bf16, fp8) in fp32; others as is."""
    if isinstance(value, torch.Tensor) and value.is_floating_point() and value.itemsize < 4:
        return value.float()
    return value


def _make_raw(
    module: nn.Module, call: Callable[..., Any], options: dict[str, Any]
) -> Callable[..., Any]:
    """The eager forward every backend must match, with channels_last/autocast applied."""
    autocast = options.get("autocast")
    full_precision = _channels_last_call(call) if options.get("channels_last") else call
    if autocast is None:
        return full_precision

    def raw(*args: Any, **kwargs: Any) -> Any:
        device_type = _device_of(module).type  # no parameters: buffers, else cpu
        with torch.autocast(device_type, dtype=autocast):
            out = full_precision(*args, **kwargs)
        # Hand fp32 back so the user's loss is computed in full precision (dataclasses too);
        # a float64 output (autocast leaves those alone) keeps its precision.
        return map_output_tensors(_to_fp32, out)

    raw.full_precision = full_precision  # type: ignore[attr-defined]  # the engine's 2nd check
    return raw


def _still_lazy(module: nn.Module) -> bool:
    """Whether ``module`` holds lazy parameters or buffers (``nn.LazyLinear`` before its
    first call). Their first call runs eagerly: it gives them their shapes, and no backend
    can be built or checked against eager before that. Remembered once they are all set."""
    if module.__dict__.get("_scramjet_materialized"):
        return False
    lazy = any(is_lazy(t) for t in itertools.chain(module.parameters(), module.buffers()))
    if not lazy:
        module.__dict__["_scramjet_materialized"] = True
    return lazy


def _in_function_transform() -> bool:
    """Whether a ``torch.func`` transform (``grad``, ``vmap``, ``jacrev``, ...) is running.

    Inside one, the first-step check cannot run (it restores buffers in place and draws a
    random projection, both refused there), so such calls run eagerly, unchecked, and never
    cost a backend that the plain training steps use; sparse-backprop layers run dense."""
    return in_function_transform()


def _under_saved_tensor_hooks(engine: Engine, module: nn.Module) -> Callable[..., Any] | None:
    """The backend a call inside saved-tensor hooks runs directly, if one is checked.

    ``torch.utils.checkpoint(..., use_reentrant=False)`` (and ``save_on_cpu``) record the
    tensors the forward saves, expect its recomputation in backward to save the same ones,
    and end that recomputation early by raising inside it. So such a call is one plain call
    of one callable, forward and recomputation alike: the backend already checked in this
    mode (by a call outside the hooks), else eager; no check, and no fallback that would
    take checkpoint's own stop for a backend's failure.
    """
    engine._last_train = None  # nothing to undo for this call if its backward fails
    active = engine.active
    mode = (module.training, torch.is_grad_enabled())
    fn = engine.fns.get(active) if active is not None else None
    return fn if fn is not None and mode in engine.verified.get(active or "", set()) else None


def _tracing() -> bool:
    """Whether the call is being traced (``torch.export``, ``torch.onnx.export``,
    ``torch.jit.trace``, or a ``torch.compile`` of a model that holds this one): what is
    traced is the model's own forward; a backend's check cannot run on traced tensors."""
    return bool(torch.compiler.is_compiling() or torch._C._is_tracing())


def _direct_call(
    engine: Engine, module: nn.Module, raw: Callable[..., Any]
) -> Callable[..., Any] | None:
    """What runs this call outside the engine's checked path, or None (the engine runs it):
    eager inside a ``torch.func`` transform, under tracing and on lazy layers' first call;
    the checked backend (or eager) inside saved-tensor hooks."""
    if _in_function_transform() or _still_lazy(module) or _tracing():
        return raw
    hooks = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)
    if hooks is None or hooks(False) is None:
        return None
    return _under_saved_tensor_hooks(engine, module) or raw


class _RawForward(nn.Module):
    """Runs the undecorated forward of a decorated model (used by ``ORTModule``)."""

    def __init__(self, model: nn.Module, base_forward: Callable[..., Any]) -> None:
        super().__init__()
        self.model = model
        self._base_forward = base_forward

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._base_forward(self.model, *args, **kwargs)


def _options(
    patch_backprop: bool | SparseBackpropConfig,
    channels_last: bool,
    autocast: str | torch.dtype | None,
    compile_mode: str | None,
    cuda_graphs: bool,
) -> dict[str, Any]:
    return {
        "patch_backprop": patch_backprop,
        "channels_last": channels_last,
        "autocast": resolve_autocast(autocast),
        "compile_mode": compile_mode,
        "cuda_graphs": cuda_graphs,
    }


def _prepare(module: nn.Module, options: dict[str, Any]) -> None:
    """One-time, in-place model changes the options ask for."""
    patch = options.get("patch_backprop")
    if patch:
        cfg = patch if isinstance(patch, SparseBackpropConfig) else SparseBackpropConfig()
        apply_sparse_backprop(module, cfg)
    if options.get("channels_last"):
        to_channels_last(module)


def engine_of(model: nn.Module) -> Engine:
    """Return the acceleration engine of an accelerated model (decorated or wrapped).

    Raises:
        TypeError: ``model`` was not produced by ``accelerate_model``.
    """
    target = model.module if isinstance(model, AcceleratedModel) else model
    holder = model if isinstance(model, AcceleratedModel) else target
    engine: Engine | None = holder.__dict__.get(_ENGINE_ATTR)
    if engine is None:
        raise TypeError(
            f"{type(model).__name__} is not accelerated; wrap it with "
            "scramjet.accel.accelerate_model(model) or decorate its class"
        )
    return engine


def _engines_in(model: nn.Module) -> list[Engine]:
    """Every acceleration engine inside ``model`` (itself, submodules, a DDP wrapper's module)."""
    found: list[Engine] = []
    for module in model.modules():
        engine = module.__dict__.get(_ENGINE_ATTR)
        if isinstance(engine, Engine) and engine not in found:
            found.append(engine)
    return found


@contextlib.contextmanager
def recover_backward(model: nn.Module, error: BaseException) -> Iterator[None]:
    """Redo a training step whose backward pass failed inside an accelerated backend.

    A backend that fails in ``forward`` is dropped and the call redone automatically; one
    that fails in ``loss.backward()`` cannot be, because the loss is computed by your code.
    Catch the error, and redo the step inside this context: the failed forward's side effects
    (BatchNorm statistics, RNG state) are undone first, the redo runs on the next backend,
    and if it succeeds the failed backend is dropped with one warning. The Trainer does this
    by itself.

    Example:
        >>> try:  # doctest: +SKIP
        ...     loss_fn(model(x), y).backward()
        ... except Exception as exc:
        ...     with recover_backward(model, exc):
        ...         optimizer.zero_grad()
        ...         loss_fn(model(x), y).backward()

    Raises:
        BaseException: ``error`` itself, when no accelerated backend of ``model`` ran the
            failed forward (eager ran it: the error is not a backend's); the redo's own
            error, if the redo fails too (the failed backend is then kept).
    """
    suspended = [engine for engine in _engines_in(model) if engine.begin_backward_recovery()]
    if not suspended:
        raise error
    try:
        yield
    except BaseException:
        for engine in suspended:
            engine.end_backward_recovery(error, redone=False)
        raise
    for engine in suspended:
        engine.end_backward_recovery(error, redone=True)


def active_backend(model: nn.Module) -> str | None:
    """Name of the backend an accelerated model uses now (None before its first call)."""
    return engine_of(model).active


def _strip_module_prefix(
    module: nn.Module, state_dict: dict[str, Any], prefix: str, local_metadata: Any
) -> None:
    inner = prefix + "module."
    for key in [k for k in state_dict if k.startswith(inner)]:
        state_dict[prefix + key[len(inner) :]] = state_dict.pop(key)


def _add_module_prefix(
    module: nn.Module,
    state_dict: dict[str, Any],
    prefix: str,
    local_metadata: Any,
    strict: bool,
    missing_keys: list[str],
    unexpected_keys: list[str],
    error_msgs: list[str],
) -> None:
    """Give the wrapped module's own keys the wrapper's ``module.`` prefix before loading.

    A key that already carries it is left as is, unless the wrapped module has that very key
    (a model with a submodule named ``module``).
    """
    inner = prefix + "module."
    wrapped = cast("nn.Module", module.module)
    own = set(wrapped.state_dict(keep_vars=True))
    moved = {}
    for key in [k for k in state_dict if k.startswith(prefix)]:
        rest = key[len(prefix) :]
        already = rest not in own and rest.startswith("module.") and rest[7:] in own
        moved[key if already else inner + rest] = state_dict.pop(key)
    state_dict.update(moved)
    module.__dict__["_scramjet_loading"] = (prefix, error_msgs, len(error_msgs))


def _strip_reported_prefix(module: nn.Module, incompatible_keys: Any) -> None:
    """Report missing, unexpected and mismatched keys by the names ``state_dict()`` gives."""
    loading = module.__dict__.pop("_scramjet_loading", None)
    if loading is None:
        return
    prefix, error_msgs, first = loading
    inner = prefix + "module."
    for keys in (incompatible_keys.missing_keys, incompatible_keys.unexpected_keys):
        keys[:] = [prefix + k[len(inner) :] if k.startswith(inner) else k for k in keys]
    for i in range(first, len(error_msgs)):
        message = error_msgs[i].replace(f" {inner}", f" {prefix}")
        error_msgs[i] = message.replace(f'"{inner}', f'"{prefix}')


class AcceleratedModel(nn.Module):
    """Wraps a model instance; ``.module`` gives the original back.

    ``state_dict()``, ``load_state_dict()``, ``named_parameters()``, ``named_buffers()`` and
    ``named_modules()`` use the wrapped module's own names (no ``module.`` prefix), so
    checkpoints and code that picks parameters by name work on the wrapped and plain model.
    Attributes not found on the wrapper are looked up on the wrapped module.

    Args:
        module: the model to accelerate.
        backends: backend names in priority order (``None`` = measured default per device).
        patch_backprop: ``True`` or a :class:`SparseBackpropConfig` for meProp backward.
        channels_last: convert 4-D weights and inputs to channels-last memory format.
        autocast: ``"bf16"`` / ``"fp16"`` / a dtype to run forward under autocast.
        compile_mode: ``torch.compile`` mode for the ``COMPILE`` backend.
        cuda_graphs: on CUDA, let ``COMPILE`` capture CUDA graphs (static shapes only).
        tolerance: agreement required on the first-step check.

    Example:
        >>> import torch
        >>> from scramjet.accel import AcceleratedModel
        >>> net = torch.nn.Linear(4, 2)
        >>> fast = AcceleratedModel(net, backends=["PYTORCH"])
        >>> fast(torch.zeros(3, 4)).shape
        torch.Size([3, 2])
        >>> sorted(fast.state_dict())
        ['bias', 'weight']
    """

    # How the Trainer redoes a step whose backward failed in a backend (see recover_backward).
    __scramjet_backward_recovery__ = staticmethod(recover_backward)
    # forward takes anything: the Trainer picks a dict batch's keys by the wrapped module's.
    __scramjet_forwards_to__ = "module"

    def __init__(
        self,
        module: nn.Module,
        backends: Sequence[str] | None = None,
        *,
        patch_backprop: bool | SparseBackpropConfig = False,
        channels_last: bool = False,
        autocast: str | torch.dtype | None = None,
        compile_mode: str | None = None,
        cuda_graphs: bool = False,
        tolerance: Tolerance | None = None,
    ) -> None:
        if not isinstance(module, nn.Module):
            raise TypeError(
                f"AcceleratedModel expects a torch.nn.Module, got {type(module).__name__}; "
                "pass a model instance (or decorate the class with @accelerate_model())"
            )
        super().__init__()
        self.module = module
        opts = _options(patch_backprop, channels_last, autocast, compile_mode, cuda_graphs)
        _prepare(module, opts)
        self.__dict__[_ENGINE_ATTR] = Engine(_as_list(backends), opts, tolerance)
        # Module's private hook registrars are unannotated in torch.
        register_state_dict_hook = cast("Callable[..., object]", self._register_state_dict_hook)
        register_load_pre_hook = cast(
            "Callable[..., object]", self._register_load_state_dict_pre_hook
        )
        register_load_post_hook = cast(
            "Callable[..., object]", self.register_load_state_dict_post_hook
        )
        register_state_dict_hook(_strip_module_prefix)
        register_load_pre_hook(_add_module_prefix, with_module=True)
        register_load_post_hook(_strip_reported_prefix)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Run the wrapped module through the active backend."""
        engine: Engine = self.__dict__[_ENGINE_ATTR]
        raw = self.__dict__.get("_scramjet_raw")
        if raw is None:
            raw = _make_raw(self.module, self.module, engine.options)
            self.__dict__["_scramjet_raw"] = raw
        direct = _direct_call(engine, self.module, raw)
        if direct is not None:
            return direct(*args, **kwargs)
        return engine.run(self.module, raw, args, kwargs)

    def named_modules(
        self, memo: set[nn.Module] | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, nn.Module]]:
        """The wrapper, then the wrapped module and its submodules by the names ``state_dict()``
        gives (``encoder.0``, not ``module.encoder.0``); the wrapped module shares the
        wrapper's name. ``named_parameters()`` and ``named_buffers()`` follow, so lookups by
        name (freezing ``"encoder."``, weight-decay groups) work as on the plain model."""
        inner = f"{prefix}.module" if prefix else "module"
        for name, module in super().named_modules(memo, prefix, remove_duplicate):
            if name == inner:
                yield prefix, module
            elif name.startswith(inner + "."):
                yield (f"{prefix}." if prefix else "") + name[len(inner) + 1 :], module
            else:
                yield name, module

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            inner = self.__dict__.get("_modules", {}).get("module")
            if inner is None or name.startswith("__"):
                raise
            return getattr(inner, name)

    def _keeps(self, name: str) -> bool:
        """Whether setting or deleting ``name`` acts on the wrapper itself: its own names
        (``module``, ``training``, private and class-level ones, what it already holds)."""
        if self.__dict__.get("_modules", {}).get("module") is None:
            return True  # still being built (or unpickled)
        held = ("_parameters", "_buffers", "_modules")
        return (
            name in ("module", "training")
            or name.startswith("_")
            or hasattr(type(self), name)
            or name in self.__dict__
            or any(name in self.__dict__.get(table, ()) for table in held)
        )

    def __setattr__(self, name: str, value: Any) -> None:
        # Reads fall through to the wrapped model, so writes must too: ``fast.head =
        # nn.Linear(...)`` or ``fast.temperature = 0.5`` on the wrapper alone would read back
        # the new value while the forward kept using the old one.
        if name == "module" and self.__dict__.get("_modules", {}).get("module") is not None:
            self._replace_module(value)
        elif self._keeps(name):
            super().__setattr__(name, value)
        else:
            setattr(self._modules["module"], name, value)

    def _replace_module(self, value: Any) -> None:
        """``fast.module = other``: wrap ``other`` with the same options; the backends built
        and checked for the previous model are forgotten (the forward would run it)."""
        if not isinstance(value, nn.Module):
            raise TypeError(
                f"AcceleratedModel.module must be a torch.nn.Module; received "
                f"{type(value).__name__}. Assign a model instance, or wrap a new one with "
                "accelerate_model(model)."
            )
        if value is self._modules["module"]:
            return
        engine: Engine = self.__dict__[_ENGINE_ATTR]
        _prepare(value, engine.options)
        super().__setattr__("module", value)
        self.__dict__.pop("_scramjet_raw", None)
        engine.reset()

    def __delattr__(self, name: str) -> None:
        if self._keeps(name):
            super().__delattr__(name)
        else:
            delattr(self._modules["module"], name)

    def __getstate__(self) -> dict[str, Any]:
        # nn.Module's own state (it leaves out what Module.compile() attached).
        module_getstate = cast("Callable[[nn.Module], dict[str, Any]]", nn.Module.__getstate__)
        state = dict(module_getstate(self))
        state.pop("_scramjet_raw", None)
        state.pop("_scramjet_loading", None)
        return state


def _as_list(backends: Sequence[str] | str | None) -> list[str] | None:
    if backends is None:
        return None
    if isinstance(backends, str):
        return [backends]
    if not isinstance(backends, Sequence):
        raise TypeError(
            f"backends must be a list of names such as ['COMPILE', 'PYTORCH'], got "
            f"{type(backends).__name__}"
        )
    if not backends:
        raise ValueError(
            "backends=[] names no backend. Pass None for the measured default of this "
            "device, ['PYTORCH'] for eager only, or the names to try in order, such as "
            "['COMPILE', 'PYTORCH']."
        )
    return list(backends)


def _pickling(cls: type[Any], base_forward: Callable[..., Any]) -> dict[str, Any]:
    """``__getstate__``/``__setstate__`` of a decorated class. The class's own pickling
    methods (nn.Module's unless it defines them) still run: a model that leaves out a
    lock or a file handle in ``__getstate__`` pickles as before."""
    base_getstate = cast("Callable[[nn.Module], Any]", cls.__getstate__)
    base_setstate = cast("Callable[[nn.Module, Any], None]", cls.__setstate__)

    def __getstate__(self: nn.Module) -> Any:
        state = base_getstate(self)
        if isinstance(state, dict) and "_scramjet_raw" in state:
            state = {k: v for k, v in state.items() if k != "_scramjet_raw"}
        return state

    def __setstate__(self: nn.Module, state: Any) -> None:
        base_setstate(self, state)
        engine = self.__dict__.get(_ENGINE_ATTR)
        if engine is not None:
            engine.options["raw_module"] = _RawForward(self, base_forward)

    return {"__getstate__": __getstate__, "__setstate__": __setstate__}


def _decorate_class(
    cls: type[M], options: dict[str, Any], backends: list[str] | None, tolerance: Tolerance | None
) -> type[M]:
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise TypeError(f"@accelerate_model decorates nn.Module subclasses, got {cls!r}")
    Engine(backends, options, tolerance)  # validate names now, at decoration time
    base_init = cls.__init__
    base_forward = cls.forward

    made: list[type[Any]] = []  # the class built below (known once type() returns)

    @functools.wraps(base_init)
    def __init__(self: nn.Module, *args: Any, **kwargs: Any) -> None:
        base_init(self, *args, **kwargs)
        if _outermost(type(self)) is not made[0]:
            return  # a decorated subclass accelerates this instance, with its own settings
        _prepare(self, options)
        opts = dict(options, raw_module=_RawForward(self, base_forward))
        self.__dict__[_ENGINE_ATTR] = Engine(backends, opts, tolerance)

    @functools.wraps(base_forward)
    def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        engine: Engine | None = self.__dict__.get(_ENGINE_ATTR)
        if engine is None or _outermost(type(self)) is not made[0]:
            # Called from the class's own __init__ (e.g. shape inference), or reached from
            # a decorated subclass's forward, whose engine is already running this call.
            return base_forward(self, *args, **kwargs)
        raw = self.__dict__.get("_scramjet_raw")
        if raw is None:
            call = functools.partial(base_forward, self)
            raw = _make_raw(self, call, engine.options)
            self.__dict__["_scramjet_raw"] = raw
        direct = _direct_call(engine, self, raw)
        if direct is not None:
            return direct(*args, **kwargs)
        return engine.run(self, raw, args, kwargs)

    namespace = {
        "__init__": __init__,
        "forward": forward,
        **_pickling(cls, base_forward),
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
        "__scramjet_accelerated__": True,
        BACKWARD_RECOVERY: staticmethod(recover_backward),
    }
    made.append(type(cls.__name__, (cls,), namespace))
    return made[0]


def _outermost(cls: type[Any]) -> type[Any] | None:
    """The most derived class in ``cls``'s MRO that ``@accelerate_model`` made."""
    return next((c for c in cls.__mro__ if c.__dict__.get("__scramjet_accelerated__")), None)


def accelerate_model(
    model: Any = None,
    *,
    backends: Sequence[str] | str | None = None,
    patch_backprop: bool | SparseBackpropConfig = False,
    channels_last: bool = False,
    autocast: str | torch.dtype | None = None,
    compile_mode: str | None = None,
    cuda_graphs: bool = False,
    tolerance: Tolerance | None = None,
) -> Any:
    """Accelerate a model class (decorator) or a model instance (wrapper).

    Backends are tried in order, always ending in eager; each is checked against eager on
    its first call per mode and dropped with one :class:`AccelerationWarning` on failure.

    Args:
        model: an ``nn.Module`` subclass (returns a same-named subclass), an instance
            (returns :class:`AcceleratedModel`), or ``None`` (returns a decorator).
        backends: names among ``"PYTORCH"``, ``"COMPILE"``, ``"ONNXRUNTIME"``, ``"RAMMER"``
            and ``"AUTO"``; ``None`` = ``["AUTO"]`` (COMPILE on CUDA, eager on CPU).
        patch_backprop: opt-in meProp sparse backward for Linear layers (changes training
            results; see docs/acceleration.md).
        channels_last: channels-last weights and 4-D inputs (CNNs on CUDA/modern CPUs).
        autocast: ``"bf16"`` or ``"fp16"`` autocast around forward; outputs come back fp32.
        compile_mode: ``torch.compile`` mode for ``COMPILE``.
        cuda_graphs: use CUDA graphs through ``COMPILE`` on CUDA (static shapes only).
        tolerance: first-step agreement required (default :class:`Tolerance`).

    Returns:
        The decorated class, an :class:`AcceleratedModel`, or a decorator.

    Raises:
        ValueError: an unknown backend name (the message lists the valid ones).
        TypeError: ``model`` is neither a module class nor a module instance.

    Example:
        >>> import torch
        >>> from scramjet.accel import accelerate_model
        >>> fast = accelerate_model(torch.nn.Linear(4, 2), backends=["PYTORCH"])
        >>> fast(torch.zeros(1, 4)).shape, sorted(fast.state_dict())
        (torch.Size([1, 2]), ['bias', 'weight'])
    """
    opts = _options(patch_backprop, channels_last, autocast, compile_mode, cuda_graphs)
    names = _as_list(backends)
    wrapper_kwargs: dict[str, Any] = {
        "patch_backprop": patch_backprop,
        "channels_last": channels_last,
        "autocast": autocast,
        "compile_mode": compile_mode,
        "cuda_graphs": cuda_graphs,
        "tolerance": tolerance,
    }

    apply = functools.partial(_apply, names=names, opts=opts, wrapper_kwargs=wrapper_kwargs)
    return apply if model is None else apply(model)


def _apply(
    target: Any, names: list[str] | None, opts: dict[str, Any], wrapper_kwargs: dict[str, Any]
) -> Any:
    if isinstance(target, type):
        return _decorate_class(target, opts, names, wrapper_kwargs["tolerance"])
    if isinstance(target, nn.Module):
        return AcceleratedModel(target, names, **wrapper_kwargs)
    raise TypeError(
        f"accelerate_model expects an nn.Module subclass or instance, got "
        f"{type(target).__name__}; decorate the class or pass an instance"
    )


class TrainingLearner(AcceleratedModel):
    """nebulgym's name for the function form: ``TrainingLearner(model, backends)``.

    Args:
        model: the model to accelerate.
        backends: backend names in priority order (``None`` = measured default).
        extend: nebulgym's flag; ``True`` (its default) is a learner that wraps ``model``
            and reaches its attributes, as here. ``False`` is what nebulgym's class
            decorator uses for a learner attached to the model it runs: use
            ``@accelerate_model()`` on the class for that (a ``ValueError`` says so).
        **kwargs: the keyword options of :class:`AcceleratedModel`.

    Raises:
        ValueError: ``extend=False``.
        TypeError: ``extend`` is not a bool.

    Example:
        >>> import torch
        >>> from scramjet.accel import TrainingLearner
        >>> learner = TrainingLearner(torch.nn.Linear(2, 1), ["PYTORCH"])
        >>> learner(torch.ones(1, 2)).shape
        torch.Size([1, 1])
    """

    def __init__(
        self,
        model: nn.Module,
        backends: Sequence[str] | None = None,
        extend: bool = True,
        **kwargs: Any,
    ) -> None:
        _check_extend(extend)
        super().__init__(model, backends, **kwargs)


def _check_extend(extend: object) -> None:
    """nebulgym's ``extend``: True is this wrapper; False belongs to its class decorator."""
    if not isinstance(extend, bool):
        raise TypeError(
            f"TrainingLearner(extend=...): extend must be True or False; received {extend!r}. "
            "Leave it out for nebulgym's default, True (a learner that wraps the model)."
        )
    if not extend:
        raise ValueError(
            "TrainingLearner(model, backends, extend=False): nebulgym uses extend=False only "
            "inside its class decorator, for a learner attached to the model it runs. Decorate "
            "the model class with @accelerate_model() (from scramjet.compat.nebulgym or "
            "scramjet.accel) for that, or drop extend (True) to wrap this instance."
        )
