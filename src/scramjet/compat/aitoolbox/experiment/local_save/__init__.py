"""AIToolbox's ``aitoolbox.experiment.local_save`` modules."""

from __future__ import annotations

__all__: list[str] = []
