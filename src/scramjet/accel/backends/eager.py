"""PYTORCH backend: the user's forward in eager mode, unchanged."""

from __future__ import annotations

from scramjet.accel.backends import BuildContext, ForwardFn


def build_eager(forward_fn: ForwardFn, ctx: BuildContext) -> ForwardFn:
    """Return ``forward_fn`` itself: eager PyTorch is the reference every backend matches."""
    return forward_fn
