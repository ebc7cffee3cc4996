"""AIToolbox's evaluation callbacks: metrics into the history, printed reports, plots and files.

:class:`ModelPerformanceEvaluation` predicts with the TrainLoop, fills a result package
and records each of its metrics as ``val_<name>`` / ``train_<name>`` in the training
history. The history reporters write into the experiment folder
``<root>/<project>/<experiment>_<timestamp>/results/`` through the experiment's report
generator, so files look as AIToolbox writes them.
"""

from __future__ import annotations

import copy
import io
import os
from collections.abc import Callable
from typing import Any

from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import (
    AbstractCallback,
    AbstractExperimentCallback,
)

__all__ = [
    "MetricHistoryRename",
    "ModelPerformanceEvaluation",
    "ModelPerformancePrintReport",
    "ModelTrainHistoryBaseCB",
    "ModelTrainHistoryFileWriter",
    "ModelTrainHistoryPlot",
    "TrainHistoryFormatter",
]


def _every(loop: Any, frequency: int) -> bool:
    """Whether the current training iteration is a positive multiple of ``frequency``."""
    idx = loop.total_iteration_idx
    return frequency > 0 and idx > 0 and (idx + 1) % frequency == 0


class ModelPerformanceEvaluation(AbstractCallback):
    """Evaluates a result package on the validation (and/or training) data into the history.

    Args:
        result_package: the package to fill (e.g. ``ClassificationResultPackage()``).
        args: hyperparameters handed to the package.
        on_each_epoch: evaluate at every epoch's end (else only at the end of training,
            with the ``train_end_`` prefix).
        on_train_data: also evaluate on the training data (a copy of the package).
        on_val_data: evaluate on the validation data.
        eval_frequency: evaluate only every this many epochs.
        on_iteration_frequency: also evaluate every this many training iterations (0: never).
        if_available_output_to_project_dir: let the package write its extra files into the
            tracked loop's experiment folder.
    """

    def __init__(
        self,
        result_package: Any,
        args: dict[str, Any],
        on_each_epoch: bool = True,
        on_train_data: bool = False,
        on_val_data: bool = True,
        eval_frequency: int | None = None,
        on_iteration_frequency: int = 0,
        if_available_output_to_project_dir: bool = True,
    ) -> None:
        super().__init__("Model performance calculator - evaluator")
        if not on_train_data and not on_val_data:
            raise ValueError(
                "ModelPerformanceEvaluation: on_train_data and on_val_data are both False, so "
                "there is nothing to evaluate; set at least one of them to True."
            )
        self.result_package, self.args = result_package, args
        self.on_each_epoch, self.on_train_data, self.on_val_data = (
            on_each_epoch,
            on_train_data,
            on_val_data,
        )
        self.eval_frequency, self.on_iteration_frequency = eval_frequency, on_iteration_frequency
        self.if_available_output_to_project_dir = if_available_output_to_project_dir
        if on_train_data:
            self.train_result_package = copy.deepcopy(result_package)

    def _packages(self) -> list[Any]:
        packages = [self.result_package]
        if self.on_train_data:
            packages.append(self.train_result_package)
        return packages

    def on_train_loop_registration(self) -> None:
        """Move metric objects to the loop's device; point packages at the experiment folder."""
        loop = self.train_loop_obj
        for pkg in self._packages():
            metric = getattr(pkg, "metric", None)
            if metric is not None and callable(getattr(metric, "to", None)):
                metric.to(loop.device)
        tracked = all(
            hasattr(loop, a)
            for a in ("project_name", "experiment_name", "local_model_result_folder_path")
        )
        if self.if_available_output_to_project_dir and tracked:
            self.result_package.set_experiment_dir_path_for_additional_results(
                loop.project_name,
                loop.experiment_name,
                loop.experiment_timestamp,
                loop.local_model_result_folder_path,
            )

    def on_train_begin(self) -> None:
        """Fail before the first step when there is no validation data to evaluate on."""
        if self.on_val_data and getattr(self.train_loop_obj, "validation_loader", ...) is None:
            raise ValueError(
                "ModelPerformanceEvaluation(on_val_data=True) was given to a TrainLoop whose "
                "validation_loader is None, so there is no validation data to evaluate on; "
                "pass a validation_loader to the TrainLoop, or evaluate on the training data "
                "with ModelPerformanceEvaluation(..., on_train_data=True, on_val_data=False)."
            )

    def _reset_metrics(self) -> None:
        for pkg in self._packages():
            metric = getattr(pkg, "metric", None)
            if metric is not None and callable(getattr(metric, "reset", None)):
                metric.reset()

    def on_epoch_end(self) -> None:
        """Evaluate (if due), then reset stateful metrics for the next epoch."""
        if self.on_each_epoch:
            epoch = self.train_loop_obj.epoch
            if self.eval_frequency is None or epoch % self.eval_frequency == 0:
                self.evaluate_model_performance()
            else:
                print(f"Skipping the evaluation at epoch {epoch} (every {self.eval_frequency}).")
        self._reset_metrics()

    def on_train_end(self) -> None:
        """Evaluate once more, recorded with the ``train_end_`` prefix."""
        self.evaluate_model_performance(prefix="train_end_")
        self._reset_metrics()

    def on_batch_end(self) -> None:
        """Evaluate every ``on_iteration_frequency`` iterations."""
        if _every(self.train_loop_obj, self.on_iteration_frequency):
            self.evaluate_model_performance(prefix=f"iterfreq{self.on_iteration_frequency}_")

    def _fill(self, pkg: Any, which: str) -> None:
        loop = self.train_loop_obj
        y_pred, y_true, extra = getattr(loop, f"predict_on_{which}_set")()
        if getattr(pkg, "requires_loss", False):
            extra = dict(extra or {})
            extra["loss"] = getattr(loop, f"evaluate_loss_on_{which}_set")(float_dict_format=True)
        pkg.prepare_result_package(
            y_true, y_pred, hyperparameters=self.args, additional_results=extra
        )

    def evaluate_model_performance(self, prefix: str = "") -> None:
        """Predict, fill the package(s), and record the metrics in the history."""
        if self.on_train_data:
            self._fill(self.train_result_package, "train")
        if self.on_val_data:
            self._fill(self.result_package, "validation")
        self.store_evaluated_metrics_to_history(prefix)

    def store_evaluated_metrics_to_history(self, prefix: str = "") -> None:
        """Record each metric as ``<prefix>val_<name>`` / ``<prefix>train_<name>``."""
        loop = self.train_loop_obj
        val = self.result_package.get_results() if self.on_val_data else {}
        train = self.train_result_package.get_results() if self.on_train_data else {}
        for name in val or train:
            if self.on_train_data:
                loop.insert_metric_result_into_history(f"{prefix}train_{name}", train[name])
            if self.on_val_data:
                loop.insert_metric_result_into_history(f"{prefix}val_{name}", val[name])


class ModelPerformancePrintReport(AbstractCallback):
    """Prints the latest value of the listed history metrics.

    List it after the callback that computes the metrics (e.g.
    :class:`ModelPerformanceEvaluation`).

    Args:
        metrics: history names to print.
        on_each_epoch: print at every epoch's end (and always at the end of training).
        report_frequency: print only every this many epochs.
        report_iteration_frequency: also print every this many iterations (0: never).
        strict_metric_reporting: a missing metric raises (else it is reported as missing).
        list_tracked_metrics: also print every metric name in the history.
    """

    def __init__(
        self,
        metrics: list[str],
        on_each_epoch: bool = True,
        report_frequency: int | None = None,
        report_iteration_frequency: int = 0,
        strict_metric_reporting: bool = True,
        list_tracked_metrics: bool = False,
    ) -> None:
        super().__init__("Model performance print reporter", 97, 0)
        if not metrics:
            raise ValueError(
                "ModelPerformancePrintReport: metrics is empty; list the history names to "
                "print, e.g. ['val_accuracy']."
            )
        self.metrics, self.on_each_epoch, self.report_frequency = (
            list(metrics),
            on_each_epoch,
            report_frequency,
        )
        self.report_iteration_frequency = report_iteration_frequency
        self.strict_metric_reporting = strict_metric_reporting
        self.list_tracked_metrics = list_tracked_metrics

    def on_epoch_end(self) -> None:
        """Print if due."""
        epoch = self.train_loop_obj.epoch
        if self.on_each_epoch and (
            self.report_frequency is None or epoch % self.report_frequency == 0
        ):
            print("------------------  End of epoch performance report  -------------------")
            self.print_performance_report()

    def on_train_end(self) -> None:
        """Print the ``train_end_`` metrics."""
        print("-----------------  End of training performance report  -----------------")
        self.print_performance_report(prefix="train_end_")

    def on_batch_end(self) -> None:
        """Print every ``report_iteration_frequency`` iterations."""
        loop = self.train_loop_obj
        if _every(loop, self.report_iteration_frequency):
            print(f"------------------  Iteration #{loop.total_iteration_idx} performance report")
            self.print_performance_report(prefix=f"iterfreq{self.report_iteration_frequency}_")

    def print_performance_report(self, prefix: str = "") -> None:
        """Print ``<prefix><metric>: <latest value>`` for each metric."""
        history = self.train_loop_obj.train_history
        if self.list_tracked_metrics:
            print(list(history.keys()))
        for metric in self.metrics:
            name = prefix + metric
            if name in history and len(history[name]):
                print(f"{name}: {history[name][-1]}")
                continue
            message = (
                f"Metric {name} is not in the training history; it holds {list(history.keys())}. "
                f"Compute it first (list ModelPerformanceEvaluation before this callback)."
            )
            if self.strict_metric_reporting:
                raise ValueError(message)
            print(message)


class TrainHistoryFormatter(AbstractCallback):
    """Adds a derived metric to the history at each epoch's end or at the end of training.

    Args:
        input_metric_getter: ``history -> list`` (a metric's whole history).
        output_metric_setter: ``list -> (new name, value)``.
        epoch_end: run at every epoch's end (exactly one of ``epoch_end``/``train_end``).
        train_end: run at the end of training.
        strict_metric_extract: raise when the input has not been updated for this epoch
            (else print a notice and skip).
    """

    def __init__(
        self,
        input_metric_getter: Callable[[Any], Any],
        output_metric_setter: Callable[[Any], tuple[str, Any]],
        epoch_end: bool = True,
        train_end: bool = False,
        strict_metric_extract: bool = True,
    ) -> None:
        if epoch_end == train_end:
            raise ValueError(
                f"Set exactly one of epoch_end and train_end to True; received "
                f"epoch_end={epoch_end}, train_end={train_end}."
            )
        super().__init__("Train history general formatter engine")
        self.input_metric_getter, self.output_metric_setter = (
            input_metric_getter,
            output_metric_setter,
        )
        self.epoch_end, self.train_end = epoch_end, train_end
        self.strict_metric_extract = strict_metric_extract

    def check_if_history_updated(self, train_end_phase: bool) -> bool:
        """Whether the input holds one value per epoch so far (one value at train end)."""
        expected = 1 if train_end_phase else self.train_loop_obj.epoch + 1
        found = len(self.input_metric_getter(self.train_loop_obj.train_history))
        if expected == found:
            return True
        message = (
            f"The input metric is not updated yet: expected {expected} value(s) in its history, "
            f"found {found}. Place the callback that computes it before this one."
        )
        if self.strict_metric_extract:
            raise ValueError(message)
        print(message)
        return False

    def format_history(self) -> None:
        """Compute the derived metric and add it to the history."""
        values = self.input_metric_getter(self.train_loop_obj.train_history)
        name, value = self.output_metric_setter(values)
        self.train_loop_obj.insert_metric_result_into_history(name, value)

    def on_epoch_end(self) -> None:
        """Format if asked."""
        if self.epoch_end and self.check_if_history_updated(False):
            self.format_history()

    def on_train_end(self) -> None:
        """Format if asked."""
        if self.train_end and self.check_if_history_updated(True):
            self.format_history()


class MetricHistoryRename(TrainHistoryFormatter):
    """Copies a metric's latest value into the history under ``new_metric_name``.

    Args:
        input_metric_path: the metric's name, or ``history -> list``.
        new_metric_name: the new name.
        epoch_end, train_end, strict_metric_extract: as for :class:`TrainHistoryFormatter`.
    """

    def __init__(
        self,
        input_metric_path: str | Callable[[Any], Any],
        new_metric_name: str,
        epoch_end: bool = True,
        train_end: bool = False,
        strict_metric_extract: bool = True,
    ) -> None:
        path = input_metric_path
        getter = path if callable(path) else (lambda history: history[path])
        super().__init__(
            getter,
            lambda values: (new_metric_name, values[-1]),
            epoch_end,
            train_end,
            strict_metric_extract,
        )


class ModelTrainHistoryBaseCB(AbstractExperimentCallback):
    """Base of the callbacks that report the training history into files of the experiment.

    Args:
        callback_name: a name for messages.
        execution_order: see :class:`AbstractCallback`.
        epoch_end: report at every epoch's end.
        train_end: report at the end of training.
        report_iteration_frequency: also report every this many iterations (0: never).
        file_format: the output format.
        project_name ... cloud_dir_prefix: see :class:`AbstractExperimentCallback`.
    """

    def __init__(
        self,
        callback_name: str,
        execution_order: int = 0,
        epoch_end: bool = True,
        train_end: bool = False,
        report_iteration_frequency: int = 0,
        file_format: str = "",
        project_name: str | None = None,
        experiment_name: str | None = None,
        local_model_result_folder_path: str | None = None,
        cloud_save_mode: str | None = None,
        bucket_name: str | None = None,
        cloud_dir_prefix: str | None = None,
    ) -> None:
        super().__init__(
            callback_name,
            project_name,
            experiment_name,
            local_model_result_folder_path,
            cloud_save_mode,
            bucket_name,
            cloud_dir_prefix,
            execution_order=execution_order,
            device_idx_execution=0,
        )
        if not epoch_end and not train_end:
            raise ValueError(
                f"{callback_name}: epoch_end and train_end are both False, so it would never "
                f"report; set at least one of them to True."
            )
        self.epoch_end, self.train_end = epoch_end, train_end
        self.report_iteration_frequency, self.file_format = report_iteration_frequency, file_format
        self.cloud_results_saver: Any = None

    def on_train_loop_registration(self) -> None:
        """Take missing project details from the loop; open the cloud saver if any."""
        self.try_infer_experiment_details(infer_cloud_details=True)
        self.prepare_results_saver()

    def prepare_results_saver(self) -> None:
        """Open the cloud results saver for S3/GCS modes (None for local only)."""
        self.cloud_results_saver = self.open_cloud_results_saver()

    def results_dir(self) -> str:
        """``<root>/<project>/<experiment>_<timestamp>/results`` (created)."""
        ts = self.train_loop_obj.experiment_timestamp
        path = os.path.join(
            os.fspath(self.local_model_result_folder_path or "."),
            str(self.project_name),
            f"{self.experiment_name}_{ts}",
            "results",
        )
        os.makedirs(path, exist_ok=True)
        return path

    def _report(self, prefix: str = "", iteration_level: bool = False) -> None:
        raise NotImplementedError

    def upload(self, files: list[tuple[str, str]]) -> None:
        """Copy ``(path inside results/, local path)`` files to the same place in the cloud copy
        of the experiment folder."""
        if self.cloud_results_saver is None or not files:
            return
        self.cloud_results_saver.mirror(
            str(self.project_name),
            str(self.experiment_name),
            self.train_loop_obj.experiment_timestamp,
            [local for _, local in files],
        )

    def on_epoch_end(self) -> None:
        """Report if asked."""
        if self.epoch_end:
            self._report()

    def on_train_end(self) -> None:
        """Report if asked, with the ``train_end_`` prefix."""
        if self.train_end:
            self._report(prefix="train_end_")

    def on_batch_end(self) -> None:
        """Report every ``report_iteration_frequency`` iterations."""
        if _every(self.train_loop_obj, self.report_iteration_frequency):
            self._report(prefix=f"iterfreq{self.report_iteration_frequency}_", iteration_level=True)

    def announce(self, key: str, paths: list[str]) -> None:
        """Tell other callbacks (e.g. EmailNotification) which files were written this epoch."""
        if self.message_service is not None:
            from scramjet.compat.aitoolbox.torchtrain.train_loop.components import (
                message_passing,
            )

            self.message_service.write_message(
                key, paths, msg_handling_settings=message_passing.MessageHandling.UNTIL_END_OF_EPOCH
            )


class ModelTrainHistoryPlot(ModelTrainHistoryBaseCB):
    """Plots every history metric into ``results/plots_epoch_<n>/`` (``png`` files or one ``pdf``).

    Arguments as for :class:`ModelTrainHistoryBaseCB`; ``file_format`` is ``'png'`` or ``'pdf'``.
    """

    def __init__(
        self,
        epoch_end: bool = True,
        train_end: bool = False,
        report_iteration_frequency: int = 0,
        file_format: str = "png",
        project_name: str | None = None,
        experiment_name: str | None = None,
        local_model_result_folder_path: str | None = None,
        cloud_save_mode: str | None = None,
        bucket_name: str | None = None,
        cloud_dir_prefix: str | None = None,
    ) -> None:
        if file_format not in ("png", "pdf"):
            raise ValueError(f"file_format must be 'png' or 'pdf'; received {file_format!r}.")
        super().__init__(
            "Model train history plot report",
            97,
            epoch_end,
            train_end,
            report_iteration_frequency,
            file_format,
            project_name,
            experiment_name,
            local_model_result_folder_path,
            cloud_save_mode,
            bucket_name,
            cloud_dir_prefix,
        )

    def _report(self, prefix: str = "", iteration_level: bool = False) -> None:
        loop = self.train_loop_obj
        suffix = f"_iter_{loop.total_iteration_idx}" if iteration_level else ""
        folder = os.path.join(self.results_dir(), f"{prefix}plots_epoch_{loop.epoch}{suffix}")
        saved = plot_history(loop.train_history, folder, self.file_format)
        self.announce("ModelTrainHistoryPlot_results_file_local_paths", [p for _, p in saved])
        self.upload(list(saved))


def plot_history(history: Any, folder: str, file_format: str) -> list[tuple[str, str]]:
    """One line plot per history metric with values, ``<folder>/<metric>.<file_format>``.

    Returns ``(path inside the results folder, local path)`` per file written.
    """
    from matplotlib.figure import Figure

    from scramjet.runtime.files import atomic_write_bytes

    os.makedirs(folder, exist_ok=True)
    saved = []
    for name in list(history.keys()):
        values = [float(v) for v in history[name] if isinstance(v, int | float)]
        if not values:
            continue
        fig = Figure(figsize=(8, 5))
        ax = fig.add_subplot()
        ax.plot(range(len(values)), values, marker="o" if len(values) < 30 else None)
        ax.set_xlabel("epoch")
        ax.set_ylabel(name)
        ax.set_title(name)
        buf = io.BytesIO()
        fig.savefig(buf, format=file_format)
        local = os.path.join(folder, f"{name}.{file_format}")
        atomic_write_bytes(local, buf.getvalue(), fsync=False)
        saved.append((os.path.join(os.path.basename(folder), f"{name}.{file_format}"), local))
    return saved


class ModelTrainHistoryFileWriter(ModelTrainHistoryBaseCB):
    """Appends the latest history values to ``results/results.<txt|tsv|csv>``.

    Arguments as for :class:`ModelTrainHistoryBaseCB`; ``file_format`` is ``'txt'``
    (readable blocks per epoch) or ``'tsv'`` (one row per epoch, the header again under
    ``NEW_METRICS_DETECTED`` when the metrics change).
    """

    def __init__(
        self,
        epoch_end: bool = True,
        train_end: bool = False,
        report_iteration_frequency: int = 0,
        file_format: str = "txt",
        project_name: str | None = None,
        experiment_name: str | None = None,
        local_model_result_folder_path: str | None = None,
        cloud_save_mode: str | None = None,
        bucket_name: str | None = None,
        cloud_dir_prefix: str | None = None,
    ) -> None:
        if file_format not in ("txt", "tsv"):
            raise ValueError(
                f"ModelTrainHistoryFileWriter: file_format must be 'txt' or 'tsv'; "
                f"received {file_format!r}."
            )
        super().__init__(
            "Model train performance history file writer",
            97,
            epoch_end,
            train_end,
            report_iteration_frequency,
            file_format,
            project_name,
            experiment_name,
            local_model_result_folder_path,
            cloud_save_mode,
            bucket_name,
            cloud_dir_prefix,
        )
        self._writer: Any = None

    def _report(self, prefix: str = "", iteration_level: bool = False) -> None:
        from scramjet.compat.aitoolbox.experiment.result_reporting.report_generator import (
            TrainingHistoryWriter,
        )

        loop = self.train_loop_obj
        results_dir = self.results_dir()
        writer = self._writer
        if writer is None or writer.experiment_results_local_path != results_dir:
            # one writer per folder: it remembers the columns already in each TSV file
            writer = self._writer = TrainingHistoryWriter(experiment_results_local_path=results_dir)
        inside, local = writer.generate_report(
            training_history=loop.train_history,
            epoch=loop.total_iteration_idx if iteration_level else loop.epoch,
            file_name=f"{prefix}results.{self.file_format}",
            file_format=self.file_format,
        )
        self.announce("ModelTrainHistoryFileWriter_results_file_local_paths", [local])
        self.upload([(inside, local)])
