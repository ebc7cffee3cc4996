"""AIToolbox's ``aitoolbox.utils``: function, file-system and dict helpers."""

from __future__ import annotations

__all__: list[str] = []
