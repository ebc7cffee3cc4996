"""AIToolbox's ``aitoolbox.cloud.GoogleCloud``: Google Cloud Storage savers and loaders."""

from __future__ import annotations

__all__: list[str] = []
