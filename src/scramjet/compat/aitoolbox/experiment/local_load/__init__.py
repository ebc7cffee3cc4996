"""AIToolbox's ``aitoolbox.experiment.local_load`` modules."""

from __future__ import annotations

__all__: list[str] = []
