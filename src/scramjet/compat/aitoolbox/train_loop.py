"""The ``TrainLoop`` family's flat module path (the code lives in ``torchtrain.train_loop``)."""

from __future__ import annotations

from scramjet.compat.aitoolbox.torchtrain.train_loop._trainer import TTTrainer
from scramjet.compat.aitoolbox.torchtrain.train_loop.train_loop import (
    EndEvaluation as _EndEvaluation,
)
from scramjet.compat.aitoolbox.torchtrain.train_loop.train_loop import TrainLoop

__all__ = ["TTTrainer", "TrainLoop", "_EndEvaluation"]
