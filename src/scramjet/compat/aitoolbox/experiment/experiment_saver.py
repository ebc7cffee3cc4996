"""AIToolbox's full experiment savers: model and results, saved locally and to a bucket.

``saver.save_experiment(model_checkpoint, result_package, training_history)`` writes the
model as a scramjet checkpoint file and the results as the local results saver does, then
uploads both through :mod:`scramjet.tracking.storage`; it returns the remote URLs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from scramjet.compat.aitoolbox.cloud.AWS.model_save import KerasS3ModelSaver, PyTorchS3ModelSaver
from scramjet.compat.aitoolbox.cloud.AWS.results_save import S3ResultsSaver
from scramjet.compat.aitoolbox.cloud.GoogleCloud.model_save import (
    KerasGoogleStorageModelSaver,
    PyTorchGoogleStorageModelSaver,
)
from scramjet.compat.aitoolbox.cloud.GoogleCloud.results_save import GoogleStorageResultsSaver
from scramjet.compat.aitoolbox.experiment._paths import timestamp_now

__all__ = [
    "AbstractExperimentSaver",
    "BaseFullExperimentSaver",
    "FullKerasExperimentGoogleStorageSaver",
    "FullKerasExperimentS3Saver",
    "FullPyTorchExperimentGoogleStorageSaver",
    "FullPyTorchExperimentS3Saver",
]


class AbstractExperimentSaver(ABC):
    """Interface of the experiment savers."""

    @abstractmethod
    def save_experiment(
        self,
        model: Any,
        result_package: Any,
        training_history: Any,
        experiment_timestamp: str | None = None,
        save_true_pred_labels: bool = False,
        separate_files: bool = False,
    ) -> list[str]:
        """Save model and results; return where they were saved."""


class BaseFullExperimentSaver(AbstractExperimentSaver):
    """A model saver and a results saver used together for one experiment.

    Args:
        model_saver: saves the model (``save_model`` returns ``(url, timestamp, local path)``).
        results_saver: saves the results (``save_experiment_results`` returns ``(urls, timestamp)``).
        project_name: folder of the project.
        experiment_name: prefix of the experiment folder.
        experiment_timestamp: the folder's timestamp; default: when ``save_experiment`` runs.

    The bucket savers below also take ``storage_options`` in fsspec's form (e.g.
    ``{"token": "anon"}`` for a Google Cloud Storage emulator; ``key``/``secret``/
    ``client_kwargs`` for S3, turned into the boto3 client's arguments).
    """

    def __init__(
        self,
        model_saver: Any,
        results_saver: Any,
        project_name: str,
        experiment_name: str,
        experiment_timestamp: str | None = None,
        local_model_result_folder_path: str = "~/project/model_result",
    ) -> None:
        self.model_saver = model_saver
        self.results_saver = results_saver
        self.project_name = project_name
        self.experiment_name = experiment_name
        self.experiment_timestamp = experiment_timestamp
        self.local_model_result_folder_path = local_model_result_folder_path

    def save_experiment(
        self,
        model: Any,
        result_package: Any,
        training_history: Any,
        experiment_timestamp: str | None = None,
        save_true_pred_labels: bool = False,
        separate_files: bool = False,
    ) -> list[str]:
        """Save the model and the results; returns the model's URL, then the results' URLs."""
        stamp = experiment_timestamp or self.experiment_timestamp or timestamp_now()
        model_url, _, _ = self.model_saver.save_model(
            model, self.project_name, self.experiment_name, stamp
        )
        result_urls, _ = self.results_saver.save_experiment_results(
            result_package,
            training_history,
            self.project_name,
            self.experiment_name,
            stamp,
            save_true_pred_labels=save_true_pred_labels,
            separate_files=separate_files,
        )
        return [model_url, *result_urls]


class _BucketExperimentSaver(BaseFullExperimentSaver):
    """A full experiment saver over one bucket: the subclass names its two saver classes."""

    model_saver_class: Any
    results_saver_class: Any

    def __init__(
        self,
        project_name: str,
        experiment_name: str,
        experiment_timestamp: str | None = None,
        bucket_name: str = "model-result",
        cloud_dir_prefix: str = "",
        local_model_result_folder_path: str = "~/project/model_result",
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        where = (bucket_name, cloud_dir_prefix, local_model_result_folder_path)
        super().__init__(
            self.model_saver_class(*where, storage_options=storage_options),
            self.results_saver_class(*where, storage_options=storage_options),
            project_name,
            experiment_name,
            experiment_timestamp,
            local_model_result_folder_path,
        )


class FullPyTorchExperimentS3Saver(_BucketExperimentSaver):
    """PyTorch checkpoint and results, saved locally and to S3."""

    model_saver_class = PyTorchS3ModelSaver
    results_saver_class = S3ResultsSaver


class FullKerasExperimentS3Saver(_BucketExperimentSaver):
    """AIToolbox's Keras S3 saver: construction works, saving a model raises (PyTorch only)."""

    model_saver_class = KerasS3ModelSaver
    results_saver_class = S3ResultsSaver


class FullPyTorchExperimentGoogleStorageSaver(_BucketExperimentSaver):
    """PyTorch checkpoint and results, saved locally and to Google Cloud Storage."""

    model_saver_class = PyTorchGoogleStorageModelSaver
    results_saver_class = GoogleStorageResultsSaver


class FullKerasExperimentGoogleStorageSaver(_BucketExperimentSaver):
    """AIToolbox's Keras GCS saver: construction works, saving a model raises (PyTorch only)."""

    model_saver_class = KerasGoogleStorageModelSaver
    results_saver_class = GoogleStorageResultsSaver
