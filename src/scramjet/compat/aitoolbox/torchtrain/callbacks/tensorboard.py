"""AIToolbox's TensorBoard callbacks: batch losses and history metrics as event files.

With ``is_project=True`` (the default) the events go to ``<experiment folder>/<log_dir>``
(``log_dir`` defaults to ``tensorboard``) and, for a cloud ``cloud_save_mode``, are copied
to the same place in the bucket at each epoch's end and at the end of training; with
``is_project=False`` they go to ``log_dir`` itself. History metrics whose name holds
``loss`` are logged under ``loss/<name>``, the others under ``metrics/<name>``, at the
loop's (0-based) epoch; batch losses under ``train_loss/last_batch_loss`` and
``train_loss/accumulated_batch_loss`` (the epoch's mean so far), at the batch count.
Extra keyword arguments go to ``torch.utils.tensorboard.SummaryWriter``
(``pip install 'scramjet[tensorboard]'``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import (
    AbstractExperimentCallback,
)

__all__ = [
    "TensorboardFullTracking",
    "TensorboardReporterBaseCB",
    "TensorboardTrainBatchLoss",
    "TensorboardTrainHistoryMetric",
]


class TensorboardReporterBaseCB(AbstractExperimentCallback):
    """Opens a ``SummaryWriter`` in the experiment folder (or ``log_dir``) and copies its
    files to the cloud copy of the experiment.

    Args:
        callback_name: a name for messages.
        log_dir: the events folder: a sub-folder of the experiment folder when
            ``is_project``, else a path of its own.
        is_project: write into the TrainLoop's experiment folder.
        project_name ... cloud_dir_prefix: see :class:`AbstractExperimentCallback`.
        **kwargs: passed to ``SummaryWriter``.
    """

    def __init__(
        self,
        callback_name: str,
        log_dir: str | None = None,
        is_project: bool = True,
        project_name: str | None = None,
        experiment_name: str | None = None,
        local_model_result_folder_path: str | None = None,
        cloud_save_mode: str | None = None,
        bucket_name: str | None = None,
        cloud_dir_prefix: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            callback_name,
            project_name,
            experiment_name,
            local_model_result_folder_path,
            cloud_save_mode,
            bucket_name,
            cloud_dir_prefix,
            device_idx_execution=0,
        )
        self.log_dir = "tensorboard" if log_dir is None else os.path.expanduser(log_dir)
        self.is_project = is_project
        self.tb_writer_kwargs = kwargs
        self.tb_writer: Any = None
        self.global_step = 0
        self.cloud_results_saver: Any = None

    def on_train_loop_registration(self) -> None:
        """Find the events folder and open the writer."""
        from torch.utils.tensorboard import SummaryWriter

        if self.is_project:
            self.try_infer_experiment_details(infer_cloud_details=True)
            self.prepare_results_saver()
            self.log_dir = self.create_log_dir()
        elif "filename_suffix" not in self.tb_writer_kwargs:
            stamp = self.train_loop_obj.experiment_timestamp
            self.tb_writer_kwargs["filename_suffix"] = f"_{stamp}"
        self.tb_writer = SummaryWriter(log_dir=self.log_dir, **self.tb_writer_kwargs)

    def experiment_dir(self) -> str:
        """``<root>/<project>/<experiment>_<timestamp>``."""
        return os.path.join(
            os.fspath(self.local_model_result_folder_path or "."),
            str(self.project_name),
            f"{self.experiment_name}_{self.train_loop_obj.experiment_timestamp}",
        )

    def create_log_dir(self) -> str:
        """The events folder inside the experiment folder (created)."""
        path = os.path.join(self.experiment_dir(), self.log_dir)
        os.makedirs(path, exist_ok=True)
        return path

    def prepare_results_saver(self) -> None:
        """A cloud results saver for S3/GCS modes, else None (local files only)."""
        self.cloud_results_saver = self.open_cloud_results_saver()

    def log_mid_train_loss(self) -> None:
        """The last batch's loss and the epoch's mean batch loss so far."""
        losses = [float(v) for v in self.train_loop_obj.loss_batch_accum if _is_number(v)]
        if not losses:
            return
        step = self.global_step
        self.tb_writer.add_scalar("train_loss/last_batch_loss", losses[-1], step)
        self.tb_writer.add_scalar(
            "train_loss/accumulated_batch_loss", sum(losses) / len(losses), step
        )

    def log_train_history_metrics(self, metric_names: Iterable[str]) -> None:
        """The latest value of each named history metric, at the loop's epoch."""
        history, epoch = self.train_loop_obj.train_history, self.train_loop_obj.epoch
        for name in metric_names:
            values = history.get(name) or []
            if not values or not _is_number(values[-1]):
                continue  # nothing yet, or not a single number (e.g. a confusion matrix)
            prefix = "loss" if "loss" in name else "metrics"
            self.tb_writer.add_scalar(f"{prefix}/{name}", float(values[-1]), epoch)

    def upload_to_cloud(self) -> None:
        """Copy the events folder's files to the same place in the cloud experiment folder."""
        if self.cloud_results_saver is None or not self.is_project:
            return
        self.tb_writer.flush()
        files = [
            os.path.join(root, name) for root, _, names in os.walk(self.log_dir) for name in names
        ]
        if files:
            self.cloud_results_saver.mirror(
                str(self.project_name),
                str(self.experiment_name),
                self.train_loop_obj.experiment_timestamp,
                files,
            )

    def on_train_end(self) -> None:
        """Close the writer and copy its files to the cloud."""
        if self.tb_writer is not None:
            self.tb_writer.close()
            self.upload_to_cloud()


class TensorboardTrainBatchLoss(TensorboardReporterBaseCB):
    """Logs the training batch loss every ``batch_log_frequency`` batches.

    Args:
        batch_log_frequency: log every this many batches.
        Others: see :class:`TensorboardReporterBaseCB`.
    """

    def __init__(
        self,
        batch_log_frequency: int = 1,
        log_dir: str | None = None,
        is_project: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__("Tensorboard batch loss", log_dir, is_project, **kwargs)
        self.batch_log_frequency = _frequency(batch_log_frequency)

    def on_batch_end(self) -> None:
        """Log the batch losses when due."""
        if self.global_step % self.batch_log_frequency == 0:
            self.log_mid_train_loss()
        self.global_step += 1

    def on_epoch_end(self) -> None:
        """Copy the events to the cloud."""
        self.upload_to_cloud()


class TensorboardTrainHistoryMetric(TensorboardReporterBaseCB):
    """Logs the latest value of history metrics at each epoch's end.

    Args:
        metric_names: the history metrics to log (None: every one).
        Others: see :class:`TensorboardReporterBaseCB`.
    """

    def __init__(
        self,
        metric_names: list[str] | None = None,
        log_dir: str | None = None,
        is_project: bool = True,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("flush_secs", 10)
        super().__init__("Tensorboard history metrics", log_dir, is_project, **kwargs)
        self.metric_names = metric_names

    def on_epoch_end(self) -> None:
        """Log the metrics and copy the events to the cloud."""
        names = self.metric_names
        self.log_train_history_metrics(
            list(self.train_loop_obj.train_history.keys()) if names is None else names
        )
        self.upload_to_cloud()


class TensorboardFullTracking(TensorboardReporterBaseCB):
    """Both: batch losses every ``batch_log_frequency`` batches and history metrics per epoch.

    Args:
        metric_names: the history metrics to log (None: every one).
        batch_log_frequency: log the batch losses every this many batches.
        Others: see :class:`TensorboardReporterBaseCB`.
    """

    def __init__(
        self,
        metric_names: list[str] | None = None,
        batch_log_frequency: int = 1,
        log_dir: str | None = None,
        is_project: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__("Tensorboard full tracking", log_dir, is_project, **kwargs)
        self.metric_names = metric_names
        self.batch_log_frequency = _frequency(batch_log_frequency)

    def on_batch_end(self) -> None:
        """Log the batch losses when due."""
        if self.global_step % self.batch_log_frequency == 0:
            self.log_mid_train_loss()
        self.global_step += 1

    def on_epoch_end(self) -> None:
        """Log the metrics and copy the events to the cloud."""
        names = self.metric_names
        self.log_train_history_metrics(
            list(self.train_loop_obj.train_history.keys()) if names is None else names
        )
        self.upload_to_cloud()


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    return getattr(value, "ndim", None) == 0 or getattr(value, "shape", None) == ()


def _frequency(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"batch_log_frequency must be an int >= 1; received {value!r}. "
            "batch_log_frequency=10 logs every tenth batch."
        )
    return value
