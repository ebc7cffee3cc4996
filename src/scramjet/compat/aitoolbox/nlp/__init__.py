"""AIToolbox's ``aitoolbox.nlp`` package: text helpers, vocabulary, NLP metrics and packages."""

from __future__ import annotations

__all__: list[str] = []
