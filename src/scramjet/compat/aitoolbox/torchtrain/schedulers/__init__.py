"""AIToolbox's learning-rate schedulers as callbacks: ``basic`` (torch schedulers) and ``warmup``."""

from __future__ import annotations

__all__: list[str] = []
