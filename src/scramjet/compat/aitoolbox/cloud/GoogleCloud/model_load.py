"""AIToolbox's Google Cloud Storage model loader (see :mod:`scramjet.compat.aitoolbox.cloud._savers`)."""

from __future__ import annotations

from scramjet.compat.aitoolbox.cloud._savers import BucketModelLoader

__all__ = ["PyTorchGoogleStorageModelLoader"]


class PyTorchGoogleStorageModelLoader(BucketModelLoader):
    """Download a checkpoint saved by ``PyTorchGoogleStorageModelSaver`` from Google Cloud Storage and read it."""

    scheme = "gs"
