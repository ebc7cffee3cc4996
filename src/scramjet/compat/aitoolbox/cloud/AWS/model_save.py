"""AIToolbox's S3 model savers (see :mod:`scramjet.compat.aitoolbox.cloud._savers`)."""

from __future__ import annotations

from scramjet.compat.aitoolbox.cloud._savers import BucketModelSaver, KerasBucketModelSaver

__all__ = ["KerasS3ModelSaver", "PyTorchS3ModelSaver"]


class PyTorchS3ModelSaver(BucketModelSaver):
    """Save a PyTorch checkpoint dict locally, then upload it to S3."""

    scheme = "s3"


class KerasS3ModelSaver(KerasBucketModelSaver):
    """AIToolbox's Keras saver for S3: construction works, saving raises (PyTorch only)."""

    scheme = "s3"
