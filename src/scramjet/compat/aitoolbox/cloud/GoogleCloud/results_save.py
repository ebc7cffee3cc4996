"""AIToolbox's Google Cloud Storage results saver (see :mod:`scramjet.compat.aitoolbox.cloud._savers`)."""

from __future__ import annotations

from scramjet.compat.aitoolbox.cloud._savers import BucketResultsSaver

__all__ = ["GoogleStorageResultsSaver"]


class GoogleStorageResultsSaver(BucketResultsSaver):
    """Save results locally, then upload the files to Google Cloud Storage."""

    scheme = "gs"
