"""AIToolbox result packages: the base class, the ready-made packages and their wrappers."""

from __future__ import annotations

__all__: list[str] = []
