"""AIToolbox's documented names over scramjet's Trainer and Experiment.

``from scramjet.compat.aitoolbox import *`` gives ``TTModel``, the ``TrainLoop`` family,
``AbstractCallback`` and the main callbacks, and the result packages; the AIToolbox
module paths (``scramjet.compat.aitoolbox.torchtrain.train_loop``, ...) hold the rest.
There is no second training loop: every TrainLoop runs :class:`scramjet.Trainer`. The
TrainLoops here save into AIToolbox's experiment folders;
``scramjet.compat.aitoolbox.tracked`` has variants that save into a scramjet
:class:`~scramjet.tracking.Experiment` run folder. ``ModelCheckpoint`` and
``ModelTrainEndSave`` here are those tracked variants (local unless given
``cloud_save_mode``); AIToolbox's callbacks, with its ``checkpoint_model/`` folder and
``'s3'`` default, are in ``scramjet.compat.aitoolbox.torchtrain.callbacks.model_save``.
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
from scramjet.compat.aitoolbox.torchtrain import (
    ModelWrap,
    MultiLoss,
    MultiOptimizer,
    TrainLoop,
    TrainLoopCheckpoint,
    TrainLoopCheckpointEndSave,
    TrainLoopEndSave,
    TTBasicModel,
    TTDataParallel,
    TTDistributedDataParallel,
    TTModel,
)
from scramjet.compat.aitoolbox.torchtrain.data.dataset import BasicDataset, ListDataset
from scramjet.compat.aitoolbox.tracked import ModelCheckpoint, ModelTrainEndSave
from scramjet.compat.aitoolbox.train_loop import TTTrainer

__all__ = [
    "AbstractCallback",
    "AbstractResultPackage",
    "BasicDataset",
    "BinaryClassificationResultPackage",
    "ClassificationResultPackage",
    "EarlyStopping",
    "GradNormClip",
    "GradValueClip",
    "GradientStatsPrint",
    "ListDataset",
    "MachineTranslationResultPackage",
    "ModelCheckpoint",
    "ModelTrainEndSave",
    "ModelTrainHistoryFileWriter",
    "ModelTrainHistoryPlot",
    "ModelWrap",
    "MultiLoss",
    "MultiOptimizer",
    "PerplexityResultPackage",
    "QuestionAnswerResultPackage",
    "RegressionResultPackage",
    "TTBasicModel",
    "TTDataParallel",
    "TTDistributedDataParallel",
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
