"""AIToolbox's S3 data access: upload files and folders, download dataset files."""

from __future__ import annotations

from scramjet.compat.aitoolbox.cloud._savers import BucketDataLoader, BucketDataSaver

__all__ = ["BaseDataLoader", "BaseDataSaver"]


class BaseDataSaver(BucketDataSaver):
    """Upload files or folders to a S3 bucket."""

    scheme = "s3"


class BaseDataLoader(BucketDataLoader):
    """Download files from a S3 bucket (e.g. a dataset store)."""

    scheme = "s3"
