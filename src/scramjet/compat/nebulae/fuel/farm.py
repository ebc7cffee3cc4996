"""``nebulae.fuel.farm``: the same names as ``depot`` (nebulae's distributed example imports it).

``from scramjet.compat.nebulae.fuel import farm`` then ``farm.Tank(...)``, as in
nebulae's Multiverse example.
"""

from __future__ import annotations

from scramjet.compat.nebulae.fuel import depot as _depot
from scramjet.compat.nebulae.fuel.depot import *  # noqa: F403  (the same names as depot)

__all__ = list(_depot.__all__)
