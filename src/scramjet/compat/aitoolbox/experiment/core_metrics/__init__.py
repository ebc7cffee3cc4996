"""AIToolbox's ``aitoolbox.experiment.core_metrics`` modules."""

from __future__ import annotations

__all__: list[str] = []
