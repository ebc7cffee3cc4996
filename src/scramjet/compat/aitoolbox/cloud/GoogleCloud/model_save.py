"""AIToolbox's Google Cloud Storage model savers (see :mod:`scramjet.compat.aitoolbox.cloud._savers`)."""

from __future__ import annotations

from scramjet.compat.aitoolbox.cloud._savers import BucketModelSaver, KerasBucketModelSaver

__all__ = ["KerasGoogleStorageModelSaver", "PyTorchGoogleStorageModelSaver"]


class PyTorchGoogleStorageModelSaver(BucketModelSaver):
    """Save a PyTorch checkpoint dict locally, then upload it to Google Cloud Storage."""

    scheme = "gs"


class KerasGoogleStorageModelSaver(KerasBucketModelSaver):
    """AIToolbox's Keras saver for Google Cloud Storage: construction works, saving raises (PyTorch only)."""

    scheme = "gs"
