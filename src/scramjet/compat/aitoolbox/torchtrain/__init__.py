"""AIToolbox's ``torchtrain``: the ``TrainLoop`` family, ``TTModel`` and their parts."""

from __future__ import annotations

from scramjet.compat.aitoolbox.torchtrain.model import ModelWrap, TTBasicModel, TTModel
from scramjet.compat.aitoolbox.torchtrain.multi_loss_optim import MultiLoss, MultiOptimizer
from scramjet.compat.aitoolbox.torchtrain.parallel import TTDataParallel, TTDistributedDataParallel
from scramjet.compat.aitoolbox.torchtrain.train_loop import (
    TrainLoop,
    TrainLoopCheckpoint,
    TrainLoopCheckpointEndSave,
    TrainLoopEndSave,
)

__all__ = [
    "ModelWrap",
    "MultiLoss",
    "MultiOptimizer",
    "TTBasicModel",
    "TTDataParallel",
    "TTDistributedDataParallel",
    "TTModel",
    "TrainLoop",
    "TrainLoopCheckpoint",
    "TrainLoopCheckpointEndSave",
    "TrainLoopEndSave",
]
