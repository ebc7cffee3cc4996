"""AIToolbox's ``aitoolbox.nlp.experiment_evaluation``: NLP metrics, packages, heatmaps."""

from __future__ import annotations

__all__: list[str] = []
