"""AIToolbox's S3 model loader (see :mod:`scramjet.compat.aitoolbox.cloud._savers`)."""

from __future__ import annotations

from scramjet.compat.aitoolbox.cloud._savers import BucketModelLoader

__all__ = ["PyTorchS3ModelLoader"]


class PyTorchS3ModelLoader(BucketModelLoader):
    """Download a checkpoint saved by ``PyTorchS3ModelSaver`` from S3 and read it."""

    scheme = "s3"
