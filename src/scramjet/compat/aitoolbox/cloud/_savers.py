"""The bucket-backed savers and loaders; ``AWS`` and ``GoogleCloud`` set the scheme.

A saver first writes exactly what the local saver writes (a scramjet checkpoint file, the
results files), then mirrors those files to
``<scheme>://<bucket>/<cloud_dir_prefix>/<project>/<experiment>_<timestamp>/`` with the same
relative paths, through :mod:`scramjet.tracking.storage`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from scramjet.compat.aitoolbox.cloud._transfer import (
    bucket_url,
    get_file,
    local_files_under,
    mirror_files,
    put_file,
)
from scramjet.compat.aitoolbox.experiment._paths import experiment_dir, timestamp_now
from scramjet.compat.aitoolbox.experiment.local_load.local_model_load import (
    PyTorchLocalModelLoader,
)
from scramjet.compat.aitoolbox.experiment.local_save.local_model_save import (
    PyTorchLocalModelSaver,
    keras_unsupported,
    model_file_name,
)
from scramjet.compat.aitoolbox.experiment.local_save.local_results_save import LocalResultsSaver


class _Bucket:
    """Bucket, prefix and local root shared by the savers and loaders."""

    scheme = "s3"

    def __init__(
        self,
        bucket_name: str,
        cloud_dir_prefix: str,
        local_model_result_folder_path: str,
        storage_options: Mapping[str, Any] | None,
    ) -> None:
        self.bucket_name = bucket_name
        self.cloud_dir_prefix = cloud_dir_prefix
        self.local_model_result_folder_path = os.path.expanduser(local_model_result_folder_path)
        self.storage_options = storage_options

    def experiment_url(self, project_name: str, experiment_name: str, timestamp: str) -> str:
        """The remote experiment folder."""
        folder = f"{experiment_name}_{timestamp}"
        return bucket_url(
            self.scheme, self.bucket_name, self.cloud_dir_prefix, project_name, folder
        )

    def mirror(self, project: str, experiment: str, stamp: str, paths: list[str]) -> list[str]:
        """Upload local experiment files to the same place in the remote experiment folder."""
        local = experiment_dir(self.local_model_result_folder_path, project, experiment, stamp)
        url = self.experiment_url(project, experiment, stamp)
        return mirror_files(local, url, paths, self.storage_options)


class BucketModelSaver(_Bucket):
    """Save a PyTorch checkpoint dict locally (scramjet checkpoint file), then upload it."""

    def __init__(
        self,
        bucket_name: str = "model-result",
        cloud_dir_prefix: str = "",
        local_model_result_folder_path: str = "~/project/model_result",
        checkpoint_model: bool = False,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            bucket_name, cloud_dir_prefix, local_model_result_folder_path, storage_options
        )
        self.checkpoint_model = checkpoint_model
        self.local_model_saver = PyTorchLocalModelSaver(
            self.local_model_result_folder_path, checkpoint_model
        )

    def save_model(
        self,
        model: Any,
        project_name: str,
        experiment_name: str,
        experiment_timestamp: str | None = None,
        epoch: int | None = None,
        protect_existing_folder: bool = True,
        iteration_idx: int | None = None,
    ) -> tuple[str, str, str]:
        """Returns ``(remote URL, experiment timestamp, local path)``."""
        stamp = experiment_timestamp or timestamp_now()
        _, local_path = self.local_model_saver.save_model(
            model, project_name, experiment_name, stamp, epoch, iteration_idx=iteration_idx
        )
        [remote] = self.mirror(project_name, experiment_name, stamp, [local_path])
        return remote, stamp, local_path


class KerasBucketModelSaver(BucketModelSaver):
    """AIToolbox's Keras cloud saver: the name is kept, saving raises (PyTorch models only)."""

    def save_model(self, model: Any, *args: Any, **kwargs: Any) -> tuple[str, str, str]:
        """Raises :class:`TypeError`: Keras models are not supported."""
        raise keras_unsupported(f"{type(self).__name__}.save_model")


class BucketResultsSaver(_Bucket):
    """Save results locally (:class:`LocalResultsSaver`), then upload the files."""

    def __init__(
        self,
        bucket_name: str = "model-result",
        cloud_dir_prefix: str = "",
        local_model_result_folder_path: str = "~/project/model_result",
        file_format: str = "pickle",
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            bucket_name, cloud_dir_prefix, local_model_result_folder_path, storage_options
        )
        self.local_results_saver = LocalResultsSaver(
            self.local_model_result_folder_path, file_format
        )

    def save_experiment_results(
        self,
        result_package: Any,
        training_history: Any,
        project_name: str,
        experiment_name: str,
        experiment_timestamp: str | None = None,
        save_true_pred_labels: bool = False,
        separate_files: bool = False,
        protect_existing_folder: bool = True,
    ) -> tuple[list[str], str]:
        """Returns ``(remote URLs of the files, experiment timestamp)``."""
        stamp = experiment_timestamp or timestamp_now()
        saver = self.local_results_saver
        save = (
            saver.save_experiment_results_separate_files
            if separate_files
            else saver.save_experiment_results
        )
        saved = save(
            result_package,
            training_history,
            project_name,
            experiment_name,
            stamp,
            save_true_pred_labels=save_true_pred_labels,
        )
        remote = self.mirror(project_name, experiment_name, stamp, [path for _, path in saved])
        return remote, stamp


class BucketModelLoader(_Bucket):
    """Download a saved checkpoint into the local experiment folder and read it."""

    def __init__(
        self,
        local_model_result_folder_path: str,
        bucket_name: str = "model-result",
        cloud_dir_prefix: str = "",
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            bucket_name, cloud_dir_prefix, local_model_result_folder_path, storage_options
        )
        self.local_model_loader = PyTorchLocalModelLoader(self.local_model_result_folder_path)

    def load_model(
        self,
        project_name: str,
        experiment_name: str,
        experiment_timestamp: str,
        model_save_dir: str = "checkpoint_model",
        epoch_num: int | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Download ``<model_save_dir>/model_<experiment>_<timestamp>[_E<epoch>].pth`` and read it."""
        rel = f"{model_save_dir}/{model_file_name(experiment_name, experiment_timestamp, epoch_num, '.pth')}"
        url = f"{self.experiment_url(project_name, experiment_name, experiment_timestamp)}/{rel}"
        local = os.path.join(
            experiment_dir(
                self.local_model_result_folder_path,
                project_name,
                experiment_name,
                experiment_timestamp,
            ),
            rel,
        )
        get_file(url, local, self.storage_options)
        return self.local_model_loader.load_model(
            project_name, experiment_name, experiment_timestamp, model_save_dir, epoch_num, **kwargs
        )

    def init_model(self, model: Any, used_data_parallel: bool = False, **kwargs: Any) -> Any:
        """Load the downloaded weights into ``model``."""
        return self.local_model_loader.init_model(model, used_data_parallel=used_data_parallel)

    def init_optimizer(self, optimizer: Any, device: Any = None) -> Any:
        """Load the downloaded optimizer state into ``optimizer``."""
        return self.local_model_loader.init_optimizer(optimizer, device)

    def init_amp(self, amp_scaler: Any) -> Any:
        """Load the downloaded AMP scaler state."""
        return self.local_model_loader.init_amp(amp_scaler)

    def init_scheduler(
        self, scheduler_callbacks_list: list[Any], ignore_saved: bool = False
    ) -> list[Any]:
        """Load the downloaded scheduler states."""
        return self.local_model_loader.init_scheduler(scheduler_callbacks_list, ignore_saved)


class BucketDataSaver:
    """Upload single files or whole folders to a bucket."""

    scheme = "s3"

    def __init__(
        self, bucket_name: str = "model-result", storage_options: Mapping[str, Any] | None = None
    ) -> None:
        self.bucket_name = bucket_name
        self.storage_options = storage_options

    def save_file(self, local_file_path: str, cloud_file_path: str) -> str:
        """Upload ``local_file_path`` as ``<bucket>/<cloud_file_path>``; return its URL."""
        url = bucket_url(self.scheme, self.bucket_name, cloud_file_path)
        put_file(local_file_path, url, self.storage_options)
        return url

    def save_folder(self, local_folder_path: str, cloud_folder_path: str) -> list[str]:
        """Upload every file below ``local_folder_path`` under ``cloud_folder_path``."""
        return [
            self.save_file(
                path,
                "/".join(
                    p
                    for p in (
                        cloud_folder_path.strip("/"),
                        os.path.relpath(path, local_folder_path),
                    )
                    if p
                ),
            )
            for path in local_files_under(local_folder_path)
        ]


class BucketDataLoader:
    """Download files of a bucket (a dataset store)."""

    scheme = "s3"

    def __init__(
        self,
        bucket_name: str = "dataset-store",
        local_base_data_folder_path: str = "~/project/data",
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.bucket_name = bucket_name
        self.local_base_data_folder_path = os.path.expanduser(local_base_data_folder_path)
        self.storage_options = storage_options

    def load_file(self, cloud_file_path: str, local_file_path: str) -> str:
        """Download ``<bucket>/<cloud_file_path>`` to ``local_file_path``; return it."""
        url = bucket_url(self.scheme, self.bucket_name, cloud_file_path)
        return get_file(url, local_file_path, self.storage_options)
