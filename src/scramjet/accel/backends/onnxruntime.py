"""ONNXRUNTIME backend: ONNX Runtime training through ``ORTModule``.

``ORTModule`` ships in ``onnxruntime-training`` (import path
``onnxruntime.training.ortmodule``) and, older, in ``torch-ort``. Their last releases
(1.19.2, 2024) target torch 2.4-era internals; see docs/acceleration.md for which versions
were found to work. When neither imports, the builder raises with an install hint and the
engine falls back to the next backend.
"""

from __future__ import annotations

from typing import Any

from scramjet.accel.backends import BuildContext, ForwardFn

ORT_HINT = (
    "pip install onnxruntime-training==1.19.2 (CUDA) or onnxruntime-training-cpu==1.19.2 "
    "next to torch 2.4 (verified: torch==2.4.1 with onnxruntime-training-cpu==1.19.2, then "
    "python -m onnxruntime.training.ortmodule.torch_cpp_extensions.install; torch 2.8 "
    "and later do not work with the last ORT training wheels; see docs/acceleration.md)"
)


def _import_ortmodule() -> Any:
    errors = []
    try:
        from onnxruntime.training.ortmodule import ORTModule

        return ORTModule
    except Exception as exc:  # ImportError, or a torch-internals mismatch at import
        errors.append(f"onnxruntime.training.ortmodule: {type(exc).__name__}: {exc}")
    try:
        from torch_ort import ORTModule

        return ORTModule
    except Exception as exc:
        errors.append(f"torch_ort: {type(exc).__name__}: {exc}")
    raise RuntimeError(
        "ONNX Runtime training is unavailable (" + "; ".join(errors) + f"). {ORT_HINT}"
    )


def build_onnxruntime(forward_fn: ForwardFn, ctx: BuildContext) -> ForwardFn:
    """Wrap the module in ``ORTModule``.

    ``ORTModule`` exports the module's own ``forward``; ``forward_fn`` is therefore used only
    when the module is the wrapper's inner module. For a decorated class the engine passes
    the undecorated forward through ``ctx.options['raw_module']``.

    Raises:
        RuntimeError: ONNX Runtime training cannot be imported.
    """
    ort_module_cls = _import_ortmodule()
    target = ctx.options.get("raw_module", ctx.module)
    wrapped = ort_module_cls(target)

    def run(*args: Any, **kwargs: Any) -> Any:
        return wrapped(*args, **kwargs)

    return run
