"""Checkpoints that survive crashes, restarts and rotation, and exact resume.

``manager.py`` reads and writes checkpoint files (:class:`CheckpointManager`,
:func:`write_checkpoint`, :func:`read_checkpoint`); ``records.py`` describes checkpoints and keeps the folder's index; ``payload.py`` builds the
payload from live objects, with ``_storable.py`` turning every value into types that
``torch.load(weights_only=True)`` reads back; ``background.py`` snapshots a
payload and writes it on a background thread; ``resume.py`` says what a Trainer saves and
restores; ``remote.py`` keeps checkpoints on object storage (``s3://``, any fsspec URL).
"""

from scramjet.checkpoint.manager import (
    CheckpointError,
    CheckpointInfo,
    CheckpointManager,
    CheckpointMismatchError,
    CheckpointWriteError,
    CorruptCheckpointError,
    LoadResult,
    read_checkpoint,
    write_checkpoint,
)
from scramjet.checkpoint.remote import RemoteCheckpointManager, load_remote

__all__ = [
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointManager",
    "CheckpointMismatchError",
    "CheckpointWriteError",
    "CorruptCheckpointError",
    "LoadResult",
    "RemoteCheckpointManager",
    "load_remote",
    "read_checkpoint",
    "write_checkpoint",
]
