"""AIToolbox's S3 results saver (see :mod:`scramjet.compat.aitoolbox.cloud._savers`)."""

from __future__ import annotations

from scramjet.compat.aitoolbox.cloud._savers import BucketResultsSaver

__all__ = ["S3ResultsSaver"]


class S3ResultsSaver(BucketResultsSaver):
    """Save results locally, then upload the files to S3."""

    scheme = "s3"
