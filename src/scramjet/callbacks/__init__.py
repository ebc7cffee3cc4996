"""Trainer callbacks: infrastructure that plugs into the loop's events.

``DEFAULT_CALLBACKS`` (used when ``Trainer(callbacks=None)``): metric logging, a
progress bar, the NaN guard and moving extra modules to the device.
"""

from __future__ import annotations

from scramjet.callbacks.base import (
    ALIASES,
    PER_STEP_EVENTS,
    CallbackError,
    CallbackHandler,
    Event,
    StopTrainingError,
    TrainerCallback,
)
from scramjet.callbacks.control import (
    EarlyStoppingCallback,
    LimitBatchesCallback,
    LimitEvalStepsCallback,
    StepBasedEvaluationCallback,
    TerminateOnNaNCallback,
    TrainingNaNError,
)
from scramjet.callbacks.model import (
    ConvertSyncBatchNormCallback,
    ModelEmaCallback,
    MoveModulesToDeviceCallback,
    SaveBestModelCallback,
    SaveTrainingStateCallback,
)
from scramjet.callbacks.progress import (
    LogMetricsCallback,
    PrintProgressCallback,
    ProgressBarCallback,
)

#: Classes instantiated fresh for every Trainer that does not pass ``callbacks``.
DEFAULT_CALLBACKS: tuple[type[TrainerCallback], ...] = (
    MoveModulesToDeviceCallback,
    TerminateOnNaNCallback,
    ProgressBarCallback,
    LogMetricsCallback,
)

__all__ = [
    "ALIASES",
    "DEFAULT_CALLBACKS",
    "PER_STEP_EVENTS",
    "CallbackError",
    "CallbackHandler",
    "ConvertSyncBatchNormCallback",
    "EarlyStoppingCallback",
    "Event",
    "LimitBatchesCallback",
    "LimitEvalStepsCallback",
    "LogMetricsCallback",
    "ModelEmaCallback",
    "MoveModulesToDeviceCallback",
    "PrintProgressCallback",
    "ProgressBarCallback",
    "SaveBestModelCallback",
    "SaveTrainingStateCallback",
    "StepBasedEvaluationCallback",
    "StopTrainingError",
    "TerminateOnNaNCallback",
    "TrainerCallback",
    "TrainingNaNError",
]
