"""AIToolbox's ``aitoolbox.cloud.AWS``: S3 savers, loaders and data access."""

from __future__ import annotations

__all__: list[str] = []
