"""AIToolbox's ``aitoolbox.experiment.result_reporting`` modules."""

from __future__ import annotations

__all__: list[str] = []
