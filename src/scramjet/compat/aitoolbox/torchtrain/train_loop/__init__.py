"""The ``TrainLoop`` family: the plain loop and the variants that save into a tracked run."""

from __future__ import annotations

from scramjet.compat.aitoolbox.torchtrain.train_loop.train_loop import TrainLoop
from scramjet.compat.aitoolbox.torchtrain.train_loop.train_loop_tracking import (
    TrainLoopCheckpoint,
    TrainLoopCheckpointEndSave,
    TrainLoopEndSave,
)

__all__ = ["TrainLoop", "TrainLoopCheckpoint", "TrainLoopCheckpointEndSave", "TrainLoopEndSave"]
