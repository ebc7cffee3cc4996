"""AIToolbox's local experiment savers: the model and the results, in the experiment folder."""

from __future__ import annotations

import datetime
import time
from typing import Any

from scramjet.compat.aitoolbox.experiment._paths import timestamp_now
from scramjet.compat.aitoolbox.experiment.experiment_saver import AbstractExperimentSaver
from scramjet.compat.aitoolbox.experiment.local_save.local_model_save import (
    AbstractLocalModelSaver,
    KerasLocalModelSaver,
    PyTorchLocalModelSaver,
)
from scramjet.compat.aitoolbox.experiment.local_save.local_results_save import LocalResultsSaver

# ``datetime`` and ``time`` are listed because AIToolbox's module had no __all__, so
# ``from ...local_experiment_saver import *`` gave them to code written against it.
__all__ = [
    "BaseFullExperimentLocalSaver",
    "FullKerasExperimentLocalSaver",
    "FullPyTorchExperimentLocalSaver",
    "datetime",
    "time",
]


class BaseFullExperimentLocalSaver(AbstractExperimentSaver):
    """Saves the model with ``model_saver`` and the results with a :class:`LocalResultsSaver`.

    Raises:
        TypeError: ``model_saver`` is not a local model saver.
    """

    def __init__(
        self,
        model_saver: AbstractLocalModelSaver,
        project_name: str,
        experiment_name: str,
        experiment_timestamp: str | None = None,
        local_model_result_folder_path: str = "~/project/model_result",
        file_format: str = "pickle",
    ) -> None:
        if not isinstance(model_saver, AbstractLocalModelSaver):
            raise TypeError(
                f"model_saver must be a local model saver (e.g. PyTorchLocalModelSaver); "
                f"received {type(model_saver).__name__}."
            )
        self.model_saver = model_saver
        self.results_saver = LocalResultsSaver(local_model_result_folder_path, file_format)
        self.project_name = project_name
        self.experiment_name = experiment_name
        self.experiment_timestamp = experiment_timestamp

    def save_experiment(
        self,
        model: Any,
        result_package: Any,
        training_history: Any,
        experiment_timestamp: str | None = None,
        save_true_pred_labels: bool = False,
        separate_files: bool = False,
    ) -> list[str]:
        """Save model and results; returns the model's path, then the results' paths."""
        stamp = experiment_timestamp or self.experiment_timestamp or timestamp_now()
        _, model_path = self.model_saver.save_model(
            model, self.project_name, self.experiment_name, stamp
        )
        saver = self.results_saver
        save = (
            saver.save_experiment_results_separate_files
            if separate_files
            else saver.save_experiment_results
        )
        saved = save(
            result_package,
            training_history,
            self.project_name,
            self.experiment_name,
            stamp,
            save_true_pred_labels=save_true_pred_labels,
        )
        return [model_path, *(path for _, path in saved)]


class FullPyTorchExperimentLocalSaver(BaseFullExperimentLocalSaver):
    """PyTorch checkpoint (a scramjet checkpoint file) and results, saved locally."""

    def __init__(
        self,
        project_name: str,
        experiment_name: str,
        experiment_timestamp: str | None = None,
        local_model_result_folder_path: str = "~/project/model_result",
        file_format: str = "pickle",
    ) -> None:
        super().__init__(
            PyTorchLocalModelSaver(local_model_result_folder_path),
            project_name,
            experiment_name,
            experiment_timestamp,
            local_model_result_folder_path,
            file_format,
        )


class FullKerasExperimentLocalSaver(BaseFullExperimentLocalSaver):
    """AIToolbox's Keras local saver: construction works, saving a model raises."""

    def __init__(
        self,
        project_name: str,
        experiment_name: str,
        experiment_timestamp: str | None = None,
        local_model_result_folder_path: str = "~/project/model_result",
        file_format: str = "pickle",
    ) -> None:
        super().__init__(
            KerasLocalModelSaver(local_model_result_folder_path),
            project_name,
            experiment_name,
            experiment_timestamp,
            local_model_result_folder_path,
            file_format,
        )
