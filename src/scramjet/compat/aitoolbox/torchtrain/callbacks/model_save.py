"""AIToolbox's model-saving callbacks: epoch and iteration checkpoints, the end-of-training save.

The files and folders are the experiment savers' (``experiment.local_save``,
``experiment.experiment_saver``, ``cloud.AWS``/``cloud.GoogleCloud``):
``<root>/<project>/<experiment>_<timestamp>/checkpoint_model/model_<experiment>_<timestamp>_E<n>.pth``
for checkpoints, the final model and results under ``model/`` and ``results/``, and
``hyperparams_list.txt`` with the hyperparameters. A checkpoint holds the model,
optimizer and scheduler states, the epoch, the iteration and the hyperparameters (and
the AMP scaler when AMP is on), plus the run's data-order seed and random-number
generator states (``data_seed``, ``rng_states``) so that ``ModelLoadContinueTraining``
continues exactly; ``PyTorchLocalModelLoader`` reads it back.
"""

from __future__ import annotations

import datetime
import os
import sys
import warnings
from typing import Any

from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import (
    GCS_MODES,
    S3_MODES,
    AbstractCallback,
    check_cloud_save_mode,
)
from scramjet.runtime.seeding import get_rng_states

__all__ = ["ModelCheckpoint", "ModelIterationCheckpoint", "ModelTrainEndSave"]


def training_state(loop: Any, hyperparams: Any) -> dict[str, Any]:
    """What a checkpoint holds: model, optimizer and scheduler states, counters, hyperparameters."""
    get_schedulers = getattr(loop, "get_schedulers", None)
    state: dict[str, Any] = {
        "model_state_dict": loop.model.state_dict(),
        "optimizer_state_dict": loop.optimizer.state_dict(),
        "schedulers_state_dict": [s.state_dict() for s in get_schedulers()]
        if get_schedulers is not None
        else [],
        "epoch": loop.epoch,
        "iteration_idx": getattr(loop, "total_iteration_idx", 0),
        "hyperparams": hyperparams,
    }
    scaler = getattr(loop, "amp_scaler", None)
    if getattr(loop, "use_amp", False) and scaler is not None:
        state["amp"] = scaler.state_dict()
    # What a continued run needs to draw the same batches and dropout masks as this one
    # (AIToolbox's checkpoints had neither, so a resumed run followed the new process's RNG).
    data_order = getattr(getattr(loop, "trainer", None), "data_order", None)
    if data_order is not None:
        state["data_seed"] = data_order.state_dict()["seed"]
    state["rng_states"] = get_rng_states()
    return state


def check_optimizer(loop: Any, who: str) -> None:
    """Raise when the loop's optimizer cannot be saved."""
    if not callable(getattr(loop.optimizer, "state_dict", None)):
        raise AttributeError(
            f"{who}: the optimizer ({type(loop.optimizer).__name__}) has no state_dict() "
            f"method, so it cannot be saved with the model. Use a torch.optim optimizer, or "
            f"give yours state_dict()/load_state_dict()."
        )


def is_main_process(loop: Any) -> bool:
    """False only in a multi-process run's processes other than the first."""
    if not getattr(loop, "ddp_training_mode", False):
        return True
    return getattr(getattr(loop, "device", None), "index", 0) in (0, None)


def experiment_script(hyperparams: dict[str, Any]) -> str | None:
    """The training script to copy into the experiment folder, if there is one.

    ``hyperparams['experiment_file_path']`` when given (as in AIToolbox, for notebooks),
    otherwise the launched ``.py`` script; None when neither names an existing file.
    """
    path = hyperparams.get("experiment_file_path")
    if path is None:
        main = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
        path = main if main.endswith(".py") else None
    return str(path) if path is not None and os.path.isfile(path) else None


def check_cloud_destination(callback: Any, cloud: Any) -> None:
    """Write and delete a probe file in the experiment's cloud folder.

    AIToolbox's model-saving callbacks default to ``cloud_save_mode='s3'``; without
    credentials the first save would fail after a whole epoch. scramjet checks at the start
    of training instead and says how to save locally.

    Raises:
        StorageCheckError: the bucket cannot be written (the storage's answer and the fix).
    """
    from scramjet.compat.aitoolbox.cloud._transfer import check_writable
    from scramjet.compat.aitoolbox.experiment._paths import experiment_dir
    from scramjet.tracking.storage import StorageCheckError

    stamp = callback.train_loop_obj.experiment_timestamp
    names = (callback.project_name, callback.experiment_name, stamp)
    local = experiment_dir(callback.local_model_result_folder_path, *names)
    os.makedirs(local, exist_ok=True)
    try:
        check_writable(local, cloud.experiment_url(*names), cloud.storage_options)
    except StorageCheckError as exc:
        raise StorageCheckError(
            f"{type(callback).__name__}: cloud_save_mode={callback.cloud_save_mode!r} (the "
            f"default is 's3'), but {exc} To keep the model and results on local disk only, "
            f"pass cloud_save_mode=None."
        ) from exc


def claim_experiment_folder(callback: Any) -> None:
    """Create the loop's experiment folder, moving to a later timestamp when it exists.

    Timestamps have one-second resolution, so two loops of a sweep created within the same
    second (in one process or several) named the same folder, and the second run overwrote
    the first one's models and results. The folder is created with ``os.mkdir``, which
    only one caller can win; the loop's ``experiment_timestamp`` moves on by a second
    until a new folder is made. A loop claims its folder once (a later ``fit`` reuses it),
    when its first file is written (``lazy_experiment_save``: at the first save).
    """
    from scramjet.compat.aitoolbox.experiment._paths import experiment_dir

    loop = callback.train_loop_obj
    names = (callback.local_model_result_folder_path, callback.project_name)
    first = stamp = loop.experiment_timestamp
    if getattr(loop, "_claimed_experiment_folder", None) == experiment_dir(
        *names, callback.experiment_name, first
    ):
        return
    os.makedirs(os.path.join(*names), exist_ok=True)
    for attempt in range(1, 10_000):
        try:
            os.mkdir(experiment_dir(*names, callback.experiment_name, stamp))
            break
        except FileExistsError:
            stamp = _later_timestamp(first, attempt)
    folder = experiment_dir(*names, callback.experiment_name, stamp)
    if stamp != first:
        warnings.warn(
            f"{type(callback).__name__}: the experiment folder "
            f"{experiment_dir(*names, callback.experiment_name, first)!r} already exists "
            f"(another run started in the same second); this run saves into {folder!r} "
            f"instead, and its experiment_timestamp is now {stamp!r}.",
            stacklevel=2,
        )
        loop.experiment_timestamp = stamp
    loop._claimed_experiment_folder = folder


def _later_timestamp(stamp: str, seconds: int) -> str:
    """``stamp`` plus ``seconds`` in AIToolbox's format (a suffix for another format)."""
    from scramjet.compat.aitoolbox.experiment._paths import TIMESTAMP_FORMAT

    try:
        when = datetime.datetime.strptime(stamp, TIMESTAMP_FORMAT)
    except ValueError:  # a timestamp the user set in another format
        return f"{stamp}_{seconds + 1}"
    return (when + datetime.timedelta(seconds=seconds)).strftime(TIMESTAMP_FORMAT)


class _SavesHyperparams(AbstractCallback):
    """Writes ``hyperparams_list.txt`` (and the launch script and ``source_code.zip``) once
    per experiment."""

    project_name: str
    experiment_name: str
    local_model_result_folder_path: str
    hyperparams: dict[str, Any]
    _hyperparams_already_saved: bool

    def _cloud_saver(self) -> Any:
        return None

    def on_train_begin(self) -> None:
        """Check before the first step that the cloud destination can be written."""
        cloud = self._cloud_saver()
        if cloud is not None and is_main_process(self.train_loop_obj):
            check_cloud_destination(self, cloud)

    def save_hyperparams(self) -> None:
        """Write the hyperparameters file if it is not there yet (and copy it to the cloud)."""
        if is_main_process(self.train_loop_obj):  # the first write makes the folder
            claim_experiment_folder(self)
        if self._hyperparams_already_saved:
            return
        from scramjet.compat.aitoolbox.experiment.result_reporting.hyperparam_reporter import (
            HyperParamSourceReporter,
        )

        reporter = HyperParamSourceReporter(
            self.project_name,
            self.experiment_name,
            self.train_loop_obj.experiment_timestamp,
            self.local_model_result_folder_path,
        )
        if not os.path.isfile(reporter.local_hyperparams_file_path):
            written = [reporter.save_hyperparams_to_text_file(self.hyperparams)]
            script = experiment_script(self.hyperparams)
            if script is not None:
                written.append(reporter.save_experiment_python_source(script))
            sources = reporter.save_experiment_source_files(self.hyperparams)
            if sources is not None:
                written.append(sources)
            cloud = self._cloud_saver()
            if cloud is not None:
                stamp = self.train_loop_obj.experiment_timestamp
                cloud.mirror(self.project_name, self.experiment_name, stamp, written)
        self._hyperparams_already_saved = True


class ModelCheckpoint(_SavesHyperparams):
    """Saves a checkpoint at the end of every epoch, locally and optionally to S3/GCS.

    Args:
        project_name: root folder name of the project.
        experiment_name: name of the experiment.
        local_model_result_folder_path: local folder under which the project folder lives.
        hyperparams: the run's hyperparameters (written to ``hyperparams_list.txt``).
        cloud_save_mode: ``'s3'``/``'aws_s3'``/``'aws'``, ``'gcs'``/``'google_storage'``, or
            None/``'local'`` for local files only (any other value is an error).
        bucket_name: the bucket of cloud copies.
        cloud_dir_prefix: folder inside the bucket.
        rm_subopt_local_models: False keeps every local checkpoint; True (decide on
            ``'loss'``) or a metric name keeps only the ``num_best_checkpoints_kept`` best.
        num_best_checkpoints_kept: how many local checkpoints to keep when removing.
    """

    def __init__(
        self,
        project_name: str,
        experiment_name: str,
        local_model_result_folder_path: str,
        hyperparams: dict[str, Any],
        cloud_save_mode: str | None = "s3",
        bucket_name: str = "model-result",
        cloud_dir_prefix: str = "",
        rm_subopt_local_models: bool | str = False,
        num_best_checkpoints_kept: int = 2,
    ) -> None:
        super().__init__("Model checkpoint at end of epoch", 100, 0)
        check_cloud_save_mode(cloud_save_mode, type(self).__name__)
        self.project_name, self.experiment_name = project_name, experiment_name
        self.local_model_result_folder_path = os.path.expanduser(local_model_result_folder_path)
        self.hyperparams = hyperparams
        self.cloud_save_mode, self.bucket_name = cloud_save_mode, bucket_name
        self.cloud_dir_prefix = cloud_dir_prefix
        self.rm_subopt_local_models = rm_subopt_local_models
        self.num_best_checkpoints_kept = num_best_checkpoints_kept
        self.subopt_model_remover: Any = None
        self.model_checkpointer: Any = None
        self._hyperparams_already_saved = False

    def _cloud_saver(self) -> Any:
        return None if self.cloud_save_mode not in S3_MODES + GCS_MODES else self.model_checkpointer

    def on_train_loop_registration(self) -> None:
        """Check the optimizer, open the saver, write the hyperparameters unless lazy."""
        check_optimizer(self.train_loop_obj, "ModelCheckpoint")
        self.model_checkpointer = self._make_saver()
        if self.rm_subopt_local_models is not False:
            from scramjet.compat.aitoolbox.experiment.local_save.local_model_save import (
                LocalSubOptimalModelRemover,
            )

            metric = "loss" if self.rm_subopt_local_models is True else self.rm_subopt_local_models
            self.subopt_model_remover = LocalSubOptimalModelRemover(
                metric, self.num_best_checkpoints_kept
            )
        if not getattr(self.train_loop_obj, "lazy_experiment_save", False):
            self.save_hyperparams()

    def _make_saver(self) -> Any:
        args: dict[str, Any] = {
            "local_model_result_folder_path": self.local_model_result_folder_path,
            "checkpoint_model": True,
        }
        if self.cloud_save_mode in S3_MODES:
            from scramjet.compat.aitoolbox.cloud.AWS.model_save import PyTorchS3ModelSaver

            return PyTorchS3ModelSaver(
                bucket_name=self.bucket_name, cloud_dir_prefix=self.cloud_dir_prefix, **args
            )
        if self.cloud_save_mode in GCS_MODES:
            from scramjet.compat.aitoolbox.cloud.GoogleCloud.model_save import (
                PyTorchGoogleStorageModelSaver,
            )

            return PyTorchGoogleStorageModelSaver(
                bucket_name=self.bucket_name, cloud_dir_prefix=self.cloud_dir_prefix, **args
            )
        from scramjet.compat.aitoolbox.experiment.local_save.local_model_save import (
            PyTorchLocalModelSaver,
        )

        return PyTorchLocalModelSaver(**args)

    def save_checkpoint(self, iteration_idx: int | None = None) -> Any:
        """Save the current training state; returns the saver's paths."""
        self.save_hyperparams()
        loop = self.train_loop_obj
        saver = self.model_checkpointer
        args: dict[str, Any] = {
            "model": training_state(loop, self.hyperparams),
            "project_name": self.project_name,
            "experiment_name": self.experiment_name,
            "experiment_timestamp": loop.experiment_timestamp,
            "epoch": loop.epoch,
            "protect_existing_folder": True,
        }
        if iteration_idx is None:
            return saver.save_model(**args)
        return saver.save_model(**args, iteration_idx=iteration_idx)

    def on_epoch_end(self) -> None:
        """Save this epoch's checkpoint; drop the sub-optimal local ones if asked."""
        paths = self.save_checkpoint()
        if self.subopt_model_remover is not None:
            local_path = paths[-1] if isinstance(paths, list | tuple) else paths
            loop = self.train_loop_obj
            self.subopt_model_remover.decide_if_remove_suboptimal_model(
                loop.train_history, [local_path], epoch=loop.epoch
            )


class ModelIterationCheckpoint(ModelCheckpoint):
    """:class:`ModelCheckpoint` that also saves every ``save_frequency`` training iterations.

    The iteration files are named ``..._E<epoch>_ITER<iteration>.pth``; iteration 0 is
    never saved. The arguments after ``save_frequency`` are :class:`ModelCheckpoint`'s.
    """

    def __init__(
        self,
        save_frequency: int,
        project_name: str,
        experiment_name: str,
        local_model_result_folder_path: str,
        hyperparams: dict[str, Any],
        cloud_save_mode: str | None = "s3",
        bucket_name: str = "model-result",
        cloud_dir_prefix: str = "",
        rm_subopt_local_models: bool | str = False,
        num_best_checkpoints_kept: int = 2,
    ) -> None:
        if isinstance(save_frequency, bool) or not isinstance(save_frequency, int):
            raise TypeError(f"save_frequency must be an int ≥ 1; received {save_frequency!r}.")
        if save_frequency < 1:
            raise ValueError(
                f"save_frequency must be ≥ 1 (save every that many iterations); received "
                f"{save_frequency}. Use ModelCheckpoint for epoch checkpoints only."
            )
        super().__init__(
            project_name,
            experiment_name,
            local_model_result_folder_path,
            hyperparams,
            cloud_save_mode,
            bucket_name,
            cloud_dir_prefix,
            rm_subopt_local_models,
            num_best_checkpoints_kept,
        )
        self.save_frequency = save_frequency

    def on_batch_end(self) -> None:
        """Save when the iteration index is a positive multiple of ``save_frequency``."""
        idx = self.train_loop_obj.total_iteration_idx
        if idx > 0 and idx % self.save_frequency == 0:
            self.save_checkpoint(iteration_idx=idx)


class ModelTrainEndSave(_SavesHyperparams):
    """At the end of training, evaluates the result packages and saves them with the final model.

    Args:
        project_name, experiment_name, local_model_result_folder_path, hyperparams,
        cloud_save_mode, bucket_name, cloud_dir_prefix: as for :class:`ModelCheckpoint`.
        val_result_package: evaluated on the validation data (its name gets ``_VAL``).
        test_result_package: evaluated on the test data (its name gets ``_TEST``).
            At least one of the two is required.
    """

    def __init__(
        self,
        project_name: str,
        experiment_name: str,
        local_model_result_folder_path: str,
        hyperparams: dict[str, Any],
        val_result_package: Any = None,
        test_result_package: Any = None,
        cloud_save_mode: str | None = "s3",
        bucket_name: str = "model-result",
        cloud_dir_prefix: str = "",
    ) -> None:
        super().__init__("Model save at the end of training", 101)
        check_cloud_save_mode(cloud_save_mode, type(self).__name__)
        self.project_name, self.experiment_name = project_name, experiment_name
        self.local_model_result_folder_path = os.path.expanduser(local_model_result_folder_path)
        self.hyperparams = hyperparams
        self.val_result_package, self.test_result_package = val_result_package, test_result_package
        self.result_package: Any = None
        self.cloud_save_mode, self.bucket_name = cloud_save_mode, bucket_name
        self.cloud_dir_prefix = cloud_dir_prefix
        self.results_saver: Any = None
        self._hyperparams_already_saved = False
        self.check_result_packages()

    def check_result_packages(self) -> None:
        """At least one package, and each an ``AbstractResultPackage``."""
        from scramjet.compat.aitoolbox.experiment.result_package.abstract_result_packages import (
            AbstractResultPackage,
        )

        if self.val_result_package is None and self.test_result_package is None:
            raise ValueError(
                "ModelTrainEndSave needs val_result_package or test_result_package (both are "
                "None); pass the result package to evaluate at the end of training."
            )
        for name in ("val_result_package", "test_result_package"):
            pkg = getattr(self, name)
            if pkg is not None and not isinstance(pkg, AbstractResultPackage):
                raise TypeError(
                    f"{name} must be an AbstractResultPackage (e.g. "
                    f"ClassificationResultPackage()); received {type(pkg).__name__}."
                )

    def _cloud_saver(self) -> Any:
        if self.cloud_save_mode not in S3_MODES + GCS_MODES:
            return None
        return getattr(self.results_saver, "model_saver", None)

    def on_train_loop_registration(self) -> None:
        """Point the packages at the experiment folder, open the saver, write the hyperparameters."""
        loop = self.train_loop_obj
        if is_main_process(loop) and not getattr(loop, "lazy_experiment_save", False):
            claim_experiment_folder(self)  # before the packages take the folder's path
        for pkg in (self.val_result_package, self.test_result_package):
            if pkg is not None:
                pkg.set_experiment_dir_path_for_additional_results(
                    self.project_name,
                    self.experiment_name,
                    loop.experiment_timestamp,
                    self.local_model_result_folder_path,
                )
        check_optimizer(loop, "ModelTrainEndSave")
        self.results_saver = self._make_saver()
        if not getattr(loop, "lazy_experiment_save", False) and is_main_process(loop):
            self.save_hyperparams()

    def _make_saver(self) -> Any:
        local: dict[str, Any] = {
            "project_name": self.project_name,
            "experiment_name": self.experiment_name,
            "experiment_timestamp": self.train_loop_obj.experiment_timestamp,
            "local_model_result_folder_path": self.local_model_result_folder_path,
        }
        cloud: dict[str, Any] = {
            "bucket_name": self.bucket_name,
            "cloud_dir_prefix": self.cloud_dir_prefix,
        }
        if self.cloud_save_mode in S3_MODES:
            from scramjet.compat.aitoolbox.experiment.experiment_saver import (
                FullPyTorchExperimentS3Saver,
            )

            return FullPyTorchExperimentS3Saver(**cloud, **local)
        if self.cloud_save_mode in GCS_MODES:
            from scramjet.compat.aitoolbox.experiment.experiment_saver import (
                FullPyTorchExperimentGoogleStorageSaver,
            )

            return FullPyTorchExperimentGoogleStorageSaver(**cloud, **local)
        from scramjet.compat.aitoolbox.experiment.local_experiment_saver import (
            FullPyTorchExperimentLocalSaver,
        )

        return FullPyTorchExperimentLocalSaver(**local)

    def _evaluate(self, pkg: Any, which: str) -> Any:
        loop = self.train_loop_obj
        y_pred, y_true, extra = getattr(loop, f"predict_on_{which}_set")()
        extra = dict(extra or {})
        if getattr(pkg, "requires_loss", False):
            extra["loss"] = getattr(loop, f"evaluate_loss_on_{which}_set")(float_dict_format=True)
        pkg.prepare_result_package(
            y_true, y_pred, hyperparameters=self.hyperparams, additional_results=extra
        )
        return pkg

    def on_train_end(self) -> None:
        """Evaluate the packages and save them with the final model and the history."""
        loop = self.train_loop_obj
        main = is_main_process(loop)
        if main:
            self.save_hyperparams()
        state = training_state(loop, self.hyperparams)
        if self.val_result_package is not None:
            self.val_result_package.pkg_name += "_VAL"
            self.result_package = self._evaluate(self.val_result_package, "validation")
        if self.test_result_package is not None:
            self.test_result_package.pkg_name += "_TEST"
            test = self._evaluate(self.test_result_package, "test")
            self.result_package = (
                test if self.result_package is None else test + self.result_package
            )
        if main:
            self.results_saver.save_experiment(
                state,
                self.result_package,
                loop.train_history,
                experiment_timestamp=loop.experiment_timestamp,
                save_true_pred_labels=True,
            )
