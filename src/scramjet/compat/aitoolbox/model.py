"""``TTModel``'s flat module path (the code lives in ``torchtrain.model`` and ``torchtrain.parallel``)."""

from __future__ import annotations

from scramjet.compat.aitoolbox.torchtrain.model import (
    ModelWrap,
    TTBasicModel,
    TTModel,
    route_forward,
)
from scramjet.compat.aitoolbox.torchtrain.parallel import TTDataParallel

__all__ = ["ModelWrap", "TTBasicModel", "TTDataParallel", "TTModel", "route_forward"]
