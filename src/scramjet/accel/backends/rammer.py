"""RAMMER backend: accepted for compatibility, always falls back.

Rammer (NNFusion) is not packaged on PyPI or conda, targets CUDA inference only, recompiles
per input shape and returns buffers autograd cannot differentiate through, so it cannot run
a training step. The engine turns the error below into one warning and uses the next backend.
"""

from __future__ import annotations

from scramjet.accel.backends import BuildContext, ForwardFn

RAMMER_UNAVAILABLE = (
    "RAMMER (NNFusion) is not packaged for pip/conda and only compiles CUDA inference graphs "
    "that autograd cannot backpropagate through, so it cannot train; use 'COMPILE' instead"
)


def build_rammer(forward_fn: ForwardFn, ctx: BuildContext) -> ForwardFn:
    """Always raise: see the module docstring for why.

    Raises:
        RuntimeError: always.
    """
    raise RuntimeError(RAMMER_UNAVAILABLE)
