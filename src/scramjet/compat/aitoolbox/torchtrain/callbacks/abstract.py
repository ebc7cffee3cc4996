"""The base classes of AIToolbox callbacks: :class:`AbstractCallback` and :class:`AbstractExperimentCallback`.

A callback is a plain object whose hook methods the TrainLoop's callback handler calls at
fixed points of training (``on_epoch_end`` and so on). It reaches the loop through
:attr:`AbstractCallback.train_loop_obj`, set by :meth:`register_train_loop_object`.
Under scramjet the loop is :class:`scramjet.Trainer`: the handler calls these hooks from
the Trainer's events, so a callback written for AIToolbox runs unchanged.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["AbstractCallback", "AbstractExperimentCallback"]

#: Every hook a callback may override, in the order AIToolbox's handler lists them.
HOOK_NAMES: tuple[str, ...] = (
    "on_epoch_begin",
    "on_epoch_end",
    "on_train_begin",
    "on_train_end",
    "on_batch_begin",
    "on_batch_end",
    "on_after_gradient_update",
    "on_after_optimizer_step",
    "on_multiprocess_start",
    "on_after_batch_prediction",
)


class AbstractCallback:
    """Base class of every AIToolbox callback; override the hooks you need.

    Args:
        callback_name: a name used in messages and listings.
        execution_order: callbacks run in increasing order; equal orders keep the order
            in which they were registered.
        device_idx_execution: in a multi-process run, the index of the only process
            (device) that runs this callback; None runs it in every process.

    Hooks that run once per update (``on_after_gradient_update``,
    ``on_after_optimizer_step``) only run when the loop's ``grad_cb_used`` is True; a
    callback that needs them sets it in :meth:`on_train_loop_registration`.
    """

    def __init__(
        self, callback_name: str, execution_order: int = 0, device_idx_execution: int | None = None
    ) -> None:
        self.callback_name = callback_name
        self.execution_order = execution_order
        self.device_idx_execution = device_idx_execution
        self.train_loop_obj: Any = None
        self.message_service: Any = None

    def register_train_loop_object(self, train_loop_obj: Any) -> AbstractCallback:
        """Attach the TrainLoop, then call :meth:`on_train_loop_registration`; returns self."""
        self.train_loop_obj = train_loop_obj
        self.message_service = getattr(train_loop_obj, "message_service", None)
        self.on_train_loop_registration()
        return self

    def on_train_loop_registration(self) -> None:
        """Called once the TrainLoop is attached: prepare what needs the loop."""

    def on_epoch_begin(self) -> None:
        """Start of every epoch."""

    def on_epoch_end(self) -> None:
        """End of every epoch, after the loss on the validation data is in the history."""

    def on_train_begin(self) -> None:
        """Start of training."""

    def on_train_end(self) -> None:
        """End of training."""

    def on_batch_begin(self) -> None:
        """Before each training batch goes into the model."""

    def on_batch_end(self) -> None:
        """After each training batch (its update included when one is due)."""

    def on_after_gradient_update(self, optimizer_idx: int = 0) -> None:
        """After backward, before the optimizer step (gradients are complete and unscaled).

        Args:
            optimizer_idx: which optimizer is about to step (0 with a single optimizer).
        """

    def on_after_optimizer_step(self) -> None:
        """After the optimizer step has updated the weights."""

    def on_multiprocess_start(self) -> None:
        """At the start of every worker process of a multi-process (DDP) run."""

    def on_after_batch_prediction(
        self, y_pred_batch: Any, y_test_batch: Any, metadata_batch: Any, dataset_info: Any
    ) -> None:
        """After the predictions of one batch in a prediction pass.

        The arguments are what the model's ``get_predictions`` returned for the batch and
        ``dataset_info`` (a dict whose ``"type"`` is ``"train"``, ``"validation"`` or
        ``"test"``). They are the loop's own objects: do not modify them.
        """


S3_MODES = ("s3", "aws_s3", "aws")
GCS_MODES = ("gcs", "google_storage", "google storage")
#: Besides None: the value AIToolbox's own examples pass for local files only.
LOCAL_MODES = ("local",)


def check_cloud_save_mode(mode: Any, who: str) -> None:
    """Refuse a ``cloud_save_mode`` that names no storage.

    AIToolbox saved locally for any value it did not know, so ``'S3'`` or ``'aws-s3'``
    trained without uploading anything and without saying so.

    Raises:
        ValueError: ``mode`` is not None, ``'local'``, an S3 mode or a GCS mode.
    """
    known = S3_MODES + GCS_MODES + LOCAL_MODES
    if mode is None or (isinstance(mode, str) and mode in known):
        return
    close = [k for k in known if isinstance(mode, str) and k == mode.strip().lower()]
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(
        f"{who}: cloud_save_mode={mode!r} names no storage; expected 's3' (or 'aws_s3', "
        f"'aws') to also save to S3, 'gcs' (or 'google_storage') to also save to Google "
        f"Cloud Storage, or None / 'local' to save on local disk only.{hint}"
    )


class AbstractExperimentCallback(AbstractCallback):
    """A callback that writes into the experiment folder (and maybe a cloud bucket).

    Any of the project and cloud details left as None is taken from the TrainLoop by
    :meth:`try_infer_experiment_details` (the tracked TrainLoops have them).

    Args:
        callback_name: a name used in messages.
        project_name: root folder name of the project.
        experiment_name: name of the experiment (the folder adds a timestamp).
        local_model_result_folder_path: local folder under which the project folder lives;
            ``~`` is expanded.
        cloud_save_mode: ``'s3'``/``'aws_s3'``/``'aws'``, ``'gcs'``/``'google_storage'``/
            ``'google storage'``, or None/``'local'`` for local files only (any other
            value is an error).
        bucket_name: the bucket for cloud copies.
        cloud_dir_prefix: folder inside the bucket.
        execution_order: see :class:`AbstractCallback`.
        device_idx_execution: see :class:`AbstractCallback`.
    """

    def __init__(
        self,
        callback_name: str,
        project_name: str | None = None,
        experiment_name: str | None = None,
        local_model_result_folder_path: str | None = None,
        cloud_save_mode: str | None = None,
        bucket_name: str | None = None,
        cloud_dir_prefix: str | None = None,
        execution_order: int = 0,
        device_idx_execution: int | None = None,
    ) -> None:
        super().__init__(callback_name, execution_order, device_idx_execution)
        self.project_name = project_name
        self.experiment_name = experiment_name
        self.local_model_result_folder_path = (
            None
            if local_model_result_folder_path is None
            else os.path.expanduser(local_model_result_folder_path)
        )
        check_cloud_save_mode(cloud_save_mode, callback_name)
        self.cloud_save_mode = cloud_save_mode
        self.bucket_name = bucket_name
        self.cloud_dir_prefix = cloud_dir_prefix

    def try_infer_experiment_details(self, infer_cloud_details: bool) -> None:
        """Fill the project details left as None from the TrainLoop.

        Cloud details are taken from the loop only when all three (mode, bucket, prefix)
        were left as None, so a callback given its own destination keeps it.

        Raises:
            AttributeError: the loop is not a tracked TrainLoop and a detail is missing.
        """
        loop = self.train_loop_obj
        try:
            if self.project_name is None:
                self.project_name = loop.project_name
            if self.experiment_name is None:
                self.experiment_name = loop.experiment_name
            if self.local_model_result_folder_path is None:
                self.local_model_result_folder_path = loop.local_model_result_folder_path
        except AttributeError:
            raise AttributeError(
                f"{self.callback_name}: the TrainLoop in use ({type(loop).__name__}) has no "
                f"project details to infer (project_name, experiment_name, "
                f"local_model_result_folder_path). Pass them to the callback, or use a "
                f"tracked loop such as TrainLoopCheckpointEndSave."
            ) from None
        own_cloud = (self.cloud_save_mode, self.bucket_name, self.cloud_dir_prefix)
        if infer_cloud_details and own_cloud == (None, None, None):
            try:
                self.cloud_save_mode = loop.cloud_save_mode
                self.bucket_name = loop.bucket_name
                self.cloud_dir_prefix = loop.cloud_dir_prefix
            except AttributeError:
                raise AttributeError(
                    f"{self.callback_name}: the TrainLoop in use ({type(loop).__name__}) has "
                    f"no cloud details to infer (cloud_save_mode, bucket_name, "
                    f"cloud_dir_prefix). Pass them to the callback."
                ) from None

    def open_cloud_results_saver(self) -> Any:
        """The results saver of ``cloud_save_mode`` (S3 or GCS); None for local files only."""
        cloud: dict[str, Any] = {
            "bucket_name": self.bucket_name,
            "cloud_dir_prefix": self.cloud_dir_prefix,
            "local_model_result_folder_path": os.fspath(self.local_model_result_folder_path or "."),
        }
        if self.cloud_save_mode in S3_MODES:
            from scramjet.compat.aitoolbox.cloud.AWS.results_save import S3ResultsSaver

            return S3ResultsSaver(**cloud)
        if self.cloud_save_mode in GCS_MODES:
            from scramjet.compat.aitoolbox.cloud.GoogleCloud.results_save import (
                GoogleStorageResultsSaver,
            )

            return GoogleStorageResultsSaver(**cloud)
        return None
