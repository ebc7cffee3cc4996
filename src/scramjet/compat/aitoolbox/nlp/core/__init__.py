"""AIToolbox's ``aitoolbox.nlp.core``: text normalisation helpers and the vocabulary."""

from __future__ import annotations

__all__: list[str] = []
