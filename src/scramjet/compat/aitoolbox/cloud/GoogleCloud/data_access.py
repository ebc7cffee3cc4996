"""AIToolbox's Google Cloud Storage data access: upload files and folders, download dataset files."""

from __future__ import annotations

from scramjet.compat.aitoolbox.cloud._savers import BucketDataLoader, BucketDataSaver

__all__ = ["BaseDataLoader", "BaseDataSaver"]


class BaseDataSaver(BucketDataSaver):
    """Upload files or folders to a Google Cloud Storage bucket."""

    scheme = "gs"


class BaseDataLoader(BucketDataLoader):
    """Download files from a Google Cloud Storage bucket (e.g. a dataset store)."""

    scheme = "gs"
