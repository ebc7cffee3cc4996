"""AIToolbox's basic callbacks: stopping rules, data subsets, functions on hooks, notices.

Stopping works as in AIToolbox: a callback sets ``train_loop_obj.early_stop`` and the loop
ends after the current epoch. :class:`EarlyStopping` keeps its count in scramjet's core
:class:`~scramjet.callbacks.EarlyStoppingCallback` (same comparison, same checkpointed
state); :class:`TerminateOnNaN` on the training loss is the core
:class:`~scramjet.callbacks.TerminateOnNaNCallback`, which checks every step's loss.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from typing import Any, cast

from scramjet.callbacks.base import StopTrainingError, TrainerCallback
from scramjet.callbacks.control import EarlyStoppingCallback, TerminateOnNaNCallback
from scramjet.compat.aitoolbox.experiment.training_history import lower_is_better
from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import (
    GCS_MODES,
    S3_MODES,
    AbstractCallback,
    AbstractExperimentCallback,
)

__all__ = [
    "AllPredictionsSame",
    "DataSubsetTestRun",
    "EarlyStopping",
    "EmailNotification",
    "FunctionOnTrainLoop",
    "ListRegisteredCallbacks",
    "LogUpload",
    "TerminateOnNaN",
    "ThresholdEarlyStopping",
]


def latest_value(loop: Any, metric_name: str, who: str) -> Any:
    """The last recorded value of ``metric_name`` in the loop's history."""
    history = loop.train_history
    values = history[metric_name] if metric_name in history else []  # noqa: SIM401
    if not values:
        raise ValueError(
            f"{who}: the training history has no value for {metric_name!r} yet; it holds "
            f"{sorted(k for k in history if len(history[k]))}. Monitor one of those, or "
            f"add a callback that computes it (e.g. ModelPerformanceEvaluation) before this one."
        )
    return values[-1]


def new_value(callback: Any, metric_name: str) -> Any:
    """The latest value of ``metric_name``, or None when none was recorded since the
    callback's last look (``end_auto_eval=N`` computes the losses every N-th epoch only:
    an epoch without a new value says nothing about improvement)."""
    loop = callback.train_loop_obj
    value = latest_value(loop, metric_name, callback.callback_name)
    count = len(loop.train_history[metric_name])
    if count == callback.values_seen:
        return None
    callback.values_seen = count
    return value


class ListRegisteredCallbacks(AbstractCallback):
    """Prints the callbacks registered in the TrainLoop when training starts."""

    def __init__(self) -> None:
        super().__init__("Print the list of registered callbacks")

    def on_train_begin(self) -> None:
        """Ask the loop's callback handler to list its callbacks."""
        self.train_loop_obj.callbacks_handler.print_registered_callback_names()


class _OneValue:
    """The part of a Trainer the core early stopping reads: the latest value of its metric."""

    def __init__(self, value: float) -> None:
        self.run_history = self
        self.value = value

    def get_latest_metric(self, name: str) -> float:
        return self.value


class EarlyStopping(AbstractCallback):
    """Stops training when ``monitor`` has not improved by more than ``min_delta`` for ``patience`` epochs.

    A metric whose name contains ``loss`` or ``error`` must go down, any other must go up
    (``mode="min"``/``"max"`` overrides the rule). The comparison is always with the best
    value so far; after ``patience`` epochs without such an improvement, the next one
    without improvement sets ``train_loop_obj.early_stop``. Only epochs that recorded a
    new value of ``monitor`` count (``end_auto_eval=N`` computes the losses every N-th
    epoch).

    Args:
        monitor: a name in the training history (``"val_loss"``, ``"loss"``,
            ``"val_accuracy"``, ...).
        min_delta: how much better than the best a value must be to count.
        patience: epochs without improvement that are tolerated.
        mode: ``"min"``, ``"max"`` or None (from the name).
    """

    def __init__(
        self,
        monitor: str = "val_loss",
        min_delta: float = 0.0,
        patience: int = 0,
        mode: str | None = None,
    ) -> None:
        super().__init__("EarlyStopping", execution_order=99)
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 0:
            raise ValueError(
                f"patience must be an int ≥ 0 (epochs without improvement to tolerate); "
                f"received {patience!r}."
            )
        mode = mode or ("min" if lower_is_better(monitor) else "max")
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min', 'max' or None (inferred); received {mode!r}.")
        self.monitor, self.min_delta, self.patience, self.mode = monitor, min_delta, patience, mode
        self.best_epoch = 0
        self.values_seen = -1  # history values of ``monitor`` already compared
        # AIToolbox stops once the count exceeds patience; the core once it reaches its own.
        try:
            self.core = EarlyStoppingCallback(
                early_stopping_patience=patience + 1,
                early_stopping_threshold=min_delta,
                watch_metric=monitor,
                greater_is_better=mode == "max",
                reset_on_train=False,
            )
        except ValueError as err:  # the core's check, told in this class's own words
            message = str(err).replace("early_stopping_threshold", "min_delta")
            raise ValueError(f"EarlyStopping: {message}") from None

    @property
    def best_performance(self) -> float | None:
        """The best value so far (None before the first epoch)."""
        return self.core.best

    @property
    def patience_count(self) -> int:
        """Epochs without improvement that may still pass before stopping (−1: stopped)."""
        return self.patience - self.core.epochs_without_improvement

    def on_epoch_end(self) -> None:
        """Compare the latest value with the best; set ``early_stop`` when patience ran out."""
        loop = self.train_loop_obj
        latest = new_value(self, self.monitor)
        if latest is None:
            return
        value = float(latest)
        best_before = self.core.best
        try:
            self.core.on_training_run_epoch_end(cast(Any, _OneValue(value)))
        except StopTrainingError:
            loop.early_stop = True
            print(
                f"Early stopping at epoch {loop.epoch}: {self.monitor} has not improved on "
                f"{self.core.best} (best at epoch {self.best_epoch})."
            )
        if self.core.best != best_before:
            self.best_epoch = loop.epoch

    def state_dict(self) -> dict[str, Any]:
        """Best value, epochs without improvement, the best epoch and the values compared."""
        return {
            **self.core.state_dict(),
            "best_epoch": self.best_epoch,
            "values_seen": self.values_seen,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.core.load_state_dict(state)
        self.best_epoch = int(state.get("best_epoch", 0))
        self.values_seen = int(state.get("values_seen", -1))


class ThresholdEarlyStopping(AbstractCallback):
    """Stops training when ``monitor`` stays on the wrong side of ``threshold`` for more than ``patience`` epochs.

    The wrong side is above the threshold for a loss/error metric and below it for any
    other. :attr:`patience_count` starts at ``patience``, drops by one each epoch on the
    wrong side, goes back to ``patience`` on the right side, and below 0 sets
    ``train_loop_obj.early_stop``.

    Args:
        monitor: a name in the training history.
        threshold: the bound the metric must respect.
        patience: epochs on the wrong side that are tolerated.
    """

    def __init__(self, monitor: str, threshold: float, patience: int = 0) -> None:
        super().__init__("ThresholdEarlyStopping", execution_order=99)
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 0:
            raise ValueError(f"patience must be an int ≥ 0; received {patience!r}.")
        self.monitor, self.threshold, self.patience = monitor, threshold, patience
        self.patience_count = patience
        self.values_seen = -1  # history values of ``monitor`` already compared

    def on_epoch_end(self) -> None:
        """Count epochs past the threshold; set ``early_stop`` when there are too many."""
        loop = self.train_loop_obj
        latest = new_value(self, self.monitor)
        if latest is None:
            return
        value = float(latest)
        wrong = value > self.threshold if lower_is_better(self.monitor) else value < self.threshold
        self.patience_count = self.patience_count - 1 if wrong else self.patience
        if self.patience_count < 0:
            loop.early_stop = True
            print(
                f"Early stopping at epoch {loop.epoch}: {self.monitor} = {value} has been past "
                f"the threshold {self.threshold} for {self.patience + 1} epoch(s)."
            )


class TerminateOnNaN(AbstractCallback):
    """Stops training when the monitored value becomes NaN or infinite.

    With ``monitor="loss"`` (the default) inside a running TrainLoop, the core
    :class:`~scramjet.callbacks.TerminateOnNaNCallback` checks every step's loss (in groups,
    without a device sync per step) and stops within the epoch. Called directly at an
    epoch's end, it checks the latest history value of ``monitor`` and sets ``early_stop``.
    """

    def __init__(self, monitor: str = "loss") -> None:
        super().__init__("TerminateOnNaN", execution_order=98)
        self.monitor = monitor
        self.trainer_callback: TrainerCallback | None = (
            TerminateOnNaNCallback(raise_error=False) if monitor == "loss" else None
        )

    def on_epoch_end(self) -> None:
        """Check the latest value of ``monitor``."""
        loop = self.train_loop_obj
        history = loop.train_history  # TrainingHistory: no .get
        values = history[self.monitor] if self.monitor in history else []  # noqa: SIM401
        last = values[-1] if len(values) else None
        if last is not None and not math.isfinite(float(last)):
            loop.early_stop = True
            print(f"Terminating on {self.monitor} = {last} at epoch {loop.epoch}.")


class AllPredictionsSame(AbstractCallback):
    """At each epoch's end, checks whether every validation prediction equals ``value``.

    Args:
        value: the value to look for.
        stop_training: set ``early_stop`` when all predictions equal it.
        verbose: print a notice when they do.
    """

    def __init__(
        self, value: float = 0.0, stop_training: bool = False, verbose: bool = True
    ) -> None:
        super().__init__("All predictions have the same value")
        self.value, self.stop_training, self.verbose = value, stop_training, verbose
        self.all_same: bool | None = None

    def on_epoch_end(self) -> None:
        """Predict on the validation data and compare."""
        predictions = self.train_loop_obj.predict_on_validation_set()[0]
        flat = predictions.flatten().tolist() if hasattr(predictions, "flatten") else predictions
        self.all_same = all(el == self.value for el in flat)
        if self.all_same:
            if self.verbose:
                print(f"All the predicted values equal {self.value}.")
            if self.stop_training:
                self.train_loop_obj.early_stop = True


class EmailNotification(AbstractCallback):
    """E-mails a report (metrics, plots, hyperparameters) after each epoch and at the end, via AWS SES.

    Needs ``boto3`` (``pip install 'scramjet[s3]'``) and SES rights for the sender address.
    The report lists the latest value of every history metric; the files that
    ``ModelTrainHistoryPlot``/``ModelTrainHistoryFileWriter`` announced in the loop's
    message service are attached.
    """

    def __init__(
        self,
        sender_name: str,
        sender_email: str,
        recipient_email: str,
        project_name: str | None = None,
        experiment_name: str | None = None,
        aws_region: str = "eu-west-1",
    ) -> None:
        super().__init__("Send email to notify about the state of training", 98, 0)
        self.sender_name, self.sender_email = sender_name, sender_email
        self.recipient_email, self.aws_region = recipient_email, aws_region
        self.project_name, self.experiment_name = project_name, experiment_name
        self.ses_sender: Any = None

    def on_train_loop_registration(self) -> None:
        """Take the project details from the loop and open the SES client."""
        from scramjet.compat.aitoolbox.cloud.AWS.simple_email_service import SESSender

        loop = self.train_loop_obj
        self.project_name = self.project_name or getattr(loop, "project_name", None)
        self.experiment_name = self.experiment_name or getattr(loop, "experiment_name", None)
        if self.project_name is None or self.experiment_name is None:
            raise AttributeError(
                f"EmailNotification needs project_name and experiment_name; the TrainLoop in use "
                f"({type(loop).__name__}) has none. Pass them to the callback."
            )
        self.ses_sender = SESSender(
            self.sender_name, self.sender_email, self.recipient_email, self.aws_region
        )

    def _attachments(self) -> list[str]:
        paths: list[str] = []
        for key in (
            "ModelTrainHistoryPlot_results_file_local_paths",
            "ModelTrainHistoryFileWriter_results_file_local_paths",
        ):
            msgs = self.message_service.read_messages(key) if self.message_service else None
            for msg in msgs or []:
                paths.extend(msg if isinstance(msg, list | tuple) else [msg])
        return paths

    def metrics_html(self) -> str:
        """The latest value of every history metric as an HTML list."""
        history = self.train_loop_obj.train_history
        items = [f"<li><p>{k}: {v[-1]}</p></li>" for k, v in history.items() if len(v)]
        return "<ul>" + "\n".join(items) + "</ul>"

    def on_epoch_end(self) -> None:
        """Send the end-of-epoch report."""
        epoch = self.train_loop_obj.epoch
        subject = f"End of epoch {epoch} report: {self.project_name}: {self.experiment_name}"
        body = f"<h2>End of epoch {epoch}</h2>\n{self.metrics_html()}"
        self.ses_sender.send_email(subject, body, self._attachments())

    def on_train_end(self) -> None:
        """Send the end-of-training report with the hyperparameters."""
        params = getattr(self.train_loop_obj, "hyperparams", None)
        listed = (
            "<ul>" + "".join(f"<li><p>{k}: {v}</p></li>" for k, v in params.items()) + "</ul>"
            if params
            else "Not given"
        )
        subject = f"End of training: {self.project_name}: {self.experiment_name}"
        body = (
            f"<h2>End of training at epoch {self.train_loop_obj.epoch}</h2>\n"
            f"{self.metrics_html()}\n<h3>Used hyperparameters:</h3>\n{listed}"
        )
        self.ses_sender.send_email(subject, body, self._attachments())


class LogUpload(AbstractExperimentCallback):
    """Uploads a log file into the experiment's cloud folder after each epoch and at the end.

    Args:
        log_file_path: the local log file (``~`` expanded).
        fail_if_cloud_missing: raise when no cloud destination is configured (else warn).
        project_name ... cloud_dir_prefix: see :class:`AbstractExperimentCallback`.
    """

    def __init__(
        self,
        log_file_path: str = "~/project/training.log",
        fail_if_cloud_missing: bool = True,
        project_name: str | None = None,
        experiment_name: str | None = None,
        local_model_result_folder_path: str | None = None,
        cloud_save_mode: str | None = None,
        bucket_name: str | None = None,
        cloud_dir_prefix: str | None = None,
    ) -> None:
        super().__init__(
            "Upload the log file to the cloud",
            project_name,
            experiment_name,
            local_model_result_folder_path,
            cloud_save_mode,
            bucket_name,
            cloud_dir_prefix,
            execution_order=1500,
            device_idx_execution=0,
        )
        self.log_file_path = os.path.expanduser(log_file_path)
        self.fail_if_cloud_missing = fail_if_cloud_missing
        self.cloud_saver: Any = None

    def on_train_loop_registration(self) -> None:
        """Infer the destination and open the cloud saver."""
        self.try_infer_experiment_details(infer_cloud_details=True)
        self.cloud_saver = self.open_cloud_results_saver()
        if self.cloud_saver is None and self.fail_if_cloud_missing:
            raise ValueError(
                f"LogUpload has no cloud destination: cloud_save_mode is {self.cloud_save_mode!r}; "
                f"expected one of {S3_MODES + GCS_MODES}. Set it on the callback or the TrainLoop, "
                f"or pass fail_if_cloud_missing=False to only keep the local log."
            )
        else:
            print("LogUpload: no cloud destination; the log stays local only.")

    def upload_log_file(self) -> None:
        """Copy the log file into the experiment's cloud folder."""
        if self.cloud_saver is None:
            return
        from scramjet.compat.aitoolbox.cloud._transfer import put_file

        folder = self.cloud_saver.experiment_url(
            self.project_name, self.experiment_name, self.train_loop_obj.experiment_timestamp
        )
        target = f"{folder}/{os.path.basename(self.log_file_path)}"
        put_file(self.log_file_path, target, self.cloud_saver.storage_options)

    def on_epoch_end(self) -> None:
        """Upload."""
        self.upload_log_file()

    def on_train_end(self) -> None:
        """Upload."""
        self.upload_log_file()


class DataSubsetTestRun(AbstractCallback):
    """Keeps only the first few batches of each loader, for quick trial runs.

    At the start of training the loop's ``train_loader`` (and the validation and test
    loaders when asked) become lists of their first ``num_*_batches`` batches.
    """

    def __init__(
        self, num_train_batches: int = 1, num_val_batches: int = 0, num_test_batches: int = 0
    ) -> None:
        super().__init__("Run model on a small subset of the training dataset")
        self.num_train_batches = num_train_batches
        self.num_val_batches = num_val_batches
        self.num_test_batches = num_test_batches

    def on_train_loop_registration(self) -> None:
        """Check that every loader to subset exists."""
        loop = self.train_loop_obj
        for count, attr, arg in (
            (self.num_val_batches, "validation_loader", "num_val_batches"),
            (self.num_test_batches, "test_loader", "num_test_batches"),
        ):
            if count > 0 and getattr(loop, attr) is None:
                raise ValueError(
                    f"DataSubsetTestRun: {arg}={count} but the TrainLoop has no {attr}. Give the "
                    f"TrainLoop that loader, or set {arg}=0."
                )

    @staticmethod
    def subset_data_loader(data_loader: Iterable[Any], num_batches: int) -> list[Any]:
        """The first ``num_batches`` batches of ``data_loader`` as a list."""
        subset: list[Any] = []
        for batch in data_loader:
            if len(subset) == num_batches:
                break
            subset.append(batch)
        return subset

    def on_train_begin(self) -> None:
        """Replace the loaders by their subsets."""
        loop = self.train_loop_obj
        loop.train_loader = self.subset_data_loader(loop.train_loader, self.num_train_batches)
        if self.num_val_batches > 0:
            loop.validation_loader = self.subset_data_loader(
                loop.validation_loader, self.num_val_batches
            )
        if self.num_test_batches > 0:
            loop.test_loader = self.subset_data_loader(loop.test_loader, self.num_test_batches)


class FunctionOnTrainLoop(AbstractCallback):
    """Calls ``fn_to_execute(train_loop)`` on the hooks switched on by the flags.

    Args:
        fn_to_execute: a function of the TrainLoop.
        tl_registration ... after_optimizer_step: the hooks on which to call it
            (``tl_registration``: once, when the callback is registered).
        execution_order, device_idx_execution: see :class:`AbstractCallback`.
    """

    def __init__(
        self,
        fn_to_execute: Callable[[Any], Any],
        tl_registration: bool = False,
        epoch_begin: bool = False,
        epoch_end: bool = False,
        train_begin: bool = False,
        train_end: bool = False,
        batch_begin: bool = False,
        batch_end: bool = False,
        after_gradient_update: bool = False,
        after_optimizer_step: bool = False,
        execution_order: int = 0,
        device_idx_execution: int | None = None,
    ) -> None:
        super().__init__("Execute given function", execution_order, device_idx_execution)
        if not callable(fn_to_execute):
            raise TypeError(
                f"fn_to_execute must be a function taking the TrainLoop; received "
                f"{type(fn_to_execute).__name__}."
            )
        self.fn_to_execute = fn_to_execute
        self.flags = {
            "tl_registration": tl_registration,
            "epoch_begin": epoch_begin,
            "epoch_end": epoch_end,
            "train_begin": train_begin,
            "train_end": train_end,
            "batch_begin": batch_begin,
            "batch_end": batch_end,
            "after_gradient_update": after_gradient_update,
            "after_optimizer_step": after_optimizer_step,
        }

    def execute_callback(self) -> None:
        """Call the function on the TrainLoop."""
        self.fn_to_execute(self.train_loop_obj)

    def _on(self, flag: str) -> None:
        if self.flags[flag]:
            self.execute_callback()

    def on_train_loop_registration(self) -> None:
        """Ask for the gradient hooks if needed; call the function if asked."""
        if self.flags["after_gradient_update"] or self.flags["after_optimizer_step"]:
            self.train_loop_obj.grad_cb_used = True
        self._on("tl_registration")

    def on_epoch_begin(self) -> None:
        """Call if asked."""
        self._on("epoch_begin")

    def on_epoch_end(self) -> None:
        """Call if asked."""
        self._on("epoch_end")

    def on_train_begin(self) -> None:
        """Call if asked."""
        self._on("train_begin")

    def on_train_end(self) -> None:
        """Call if asked."""
        self._on("train_end")

    def on_batch_begin(self) -> None:
        """Call if asked."""
        self._on("batch_begin")

    def on_batch_end(self) -> None:
        """Call if asked."""
        self._on("batch_end")

    def on_after_gradient_update(self, optimizer_idx: int = 0) -> None:
        """Call if asked."""
        self._on("after_gradient_update")

    def on_after_optimizer_step(self) -> None:
        """Call if asked."""
        self._on("after_optimizer_step")
