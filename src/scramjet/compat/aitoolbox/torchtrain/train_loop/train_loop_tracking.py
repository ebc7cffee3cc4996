"""The ``TrainLoop`` variants that save into a tracked run (checkpoints, final model, results)."""

from __future__ import annotations

from scramjet.compat.aitoolbox.tracked import (
    TrainLoopCheckpoint,
    TrainLoopCheckpointEndSave,
    TrainLoopEndSave,
)

__all__ = ["TrainLoopCheckpoint", "TrainLoopCheckpointEndSave", "TrainLoopEndSave"]
