"""AIToolbox's documented names over scramjet's Trainer and Experiment.

``from scramjet.compat.aitoolbox import *`` gives ``TTModel``, the ``TrainLoop`` family,
``AbstractCallback`` and the main callbacks, and the result packages. There is no
second training loop: every TrainLoop runs :class:`scramjet.Trainer`.
"""

from __future__ import annotations

from scramjet.compat.aitoolbox.callbacks import (
    AbstractCallback,
    EarlyStopping,
    GradientStatsPrint,
    GradNormClip,
    GradValueClip,
    ModelTrainHistoryFileWriter,
    ModelTrainHistoryPlot,
    TensorBoardFullTracker,
    TensorboardFullTracker,
    TerminateOnNaN,
)
from scramjet.compat.aitoolbox.model import TTDataParallel, TTModel
from scramjet.compat.aitoolbox.results import (
    AbstractResultPackage,
    BinaryClassificationResultPackage,
    ClassificationResultPackage,
    MachineTranslationResultPackage,
    PerplexityResultPackage,
    QuestionAnswerResultPackage,
    RegressionResultPackage,
    TextSummarizationResultPackage,
)
from scramjet.compat.aitoolbox.tracked import (
    ModelCheckpoint,
    ModelTrainEndSave,
    TrainLoopCheckpoint,
    TrainLoopCheckpointEndSave,
    TrainLoopEndSave,
)
from scramjet.compat.aitoolbox.train_loop import TrainLoop, TTTrainer

__all__ = [
    "AbstractCallback",
    "AbstractResultPackage",
    "BinaryClassificationResultPackage",
    "ClassificationResultPackage",
    "EarlyStopping",
    "GradNormClip",
    "GradValueClip",
    "GradientStatsPrint",
    "MachineTranslationResultPackage",
    "ModelCheckpoint",
    "ModelTrainEndSave",
    "ModelTrainHistoryFileWriter",
    "ModelTrainHistoryPlot",
    "PerplexityResultPackage",
    "QuestionAnswerResultPackage",
    "RegressionResultPackage",
    "TTDataParallel",
    "TTModel",
    "TTTrainer",
    "TensorBoardFullTracker",
    "TensorboardFullTracker",
    "TerminateOnNaN",
    "TextSummarizationResultPackage",
    "TrainLoop",
    "TrainLoopCheckpoint",
    "TrainLoopCheckpointEndSave",
    "TrainLoopEndSave",
]
