"""The ``TrainLoop`` variants that save into an experiment folder, as AIToolbox's do.

Each is a :class:`TrainLoop` with the matching saving callback of
``torchtrain.callbacks.model_save`` registered for the next ``fit`` (held in the callback
handler's cache until then): ``TrainLoopCheckpoint`` → ``ModelCheckpoint`` (or
``ModelIterationCheckpoint`` with ``iteration_save_freq``), ``TrainLoopEndSave`` →
``ModelTrainEndSave``, ``TrainLoopCheckpointEndSave`` → both. The folder layout and the
cloud upload are those callbacks'. (``scramjet.compat.aitoolbox.tracked`` has the variants
that save into a scramjet :class:`~scramjet.tracking.Experiment` run folder instead.)
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from torch import nn

from scramjet.compat.aitoolbox.torchtrain.train_loop.train_loop import TrainLoop

__all__ = ["TrainLoopCheckpoint", "TrainLoopCheckpointEndSave", "TrainLoopEndSave"]


def _caller_file() -> str:
    """The file of the code that created the TrainLoop (saved with the hyperparameters)."""
    frame = inspect.currentframe()
    # The first frame outside this module: the constructors here call one another
    # (TrainLoopCheckpointEndSave -> TrainLoopEndSave), so the depth varies.
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    return frame.f_code.co_filename if frame is not None else ""


def _hyperparams_dict(hyperparams: Any) -> dict[str, Any]:
    """The hyperparameters as the dict the savers write (None: no hyperparameters)."""
    if hyperparams is None:
        return {}
    if not isinstance(hyperparams, dict):
        raise TypeError(
            f"hyperparams must be a dict of the run's hyperparameters (e.g. {{'lr': 0.01}}, or "
            f"{{}} for none); received {type(hyperparams).__name__}."
        )
    return hyperparams


def _note_sources(hyperparams: dict[str, Any], source_dirs: Sequence[str]) -> None:
    hyperparams.setdefault("experiment_file_path", _caller_file())
    hyperparams.setdefault("source_dirs_paths", source_dirs)  # as given, as AIToolbox kept it


def _check_save_freq(iteration_save_freq: Any) -> None:
    if isinstance(iteration_save_freq, bool) or not isinstance(iteration_save_freq, int):
        raise TypeError(
            f"iteration_save_freq must be an int ≥ 0; received {iteration_save_freq!r}."
        )
    if iteration_save_freq < 0:
        raise ValueError(
            f"iteration_save_freq must be ≥ 0 (0: checkpoint at epoch ends only); received "
            f"{iteration_save_freq}."
        )


def _check_packages_loaders(loop: TrainLoop, val_package: Any, test_package: Any) -> None:
    for name, package, loader in (
        ("val_result_package", val_package, loop.validation_loader),
        ("test_result_package", test_package, loop.test_loader),
    ):
        if package is not None and loader is None:
            kind = "validation_loader" if name.startswith("val") else "test_loader"
            raise ValueError(
                f"{name} is given but {kind} is None; pass the {kind} the package is evaluated "
                f"on, or drop the package."
            )


class TrainLoopCheckpoint(TrainLoop):
    """A ``TrainLoop`` that saves a model checkpoint at every epoch end (or every N iterations)."""

    def __init__(
        self,
        model: nn.Module,
        train_loader: Any,
        validation_loader: Any,
        test_loader: Any,
        optimizer: Any,
        criterion: Any,
        project_name: str,
        experiment_name: str,
        local_model_result_folder_path: str,
        hyperparams: dict[str, Any] | None,
        cloud_save_mode: str | None = "s3",
        bucket_name: str = "model-result",
        cloud_dir_prefix: str = "",
        source_dirs: Sequence[str] = (),
        rm_subopt_local_models: bool | str = False,
        num_best_checkpoints_kept: int = 2,
        iteration_save_freq: int = 0,
        **loop_kwargs: Any,
    ) -> None:
        super().__init__(
            model, train_loader, validation_loader, test_loader, optimizer, criterion, **loop_kwargs
        )
        _check_save_freq(iteration_save_freq)
        hyperparams = _hyperparams_dict(hyperparams)
        self.project_name, self.experiment_name = project_name, experiment_name
        self.local_model_result_folder_path = local_model_result_folder_path
        self.hyperparams = hyperparams
        self.cloud_save_mode, self.bucket_name = cloud_save_mode, bucket_name
        self.cloud_dir_prefix, self.source_dirs = cloud_dir_prefix, source_dirs
        self.rm_subopt_local_models = rm_subopt_local_models
        self.iteration_save_freq = iteration_save_freq
        _note_sources(hyperparams, source_dirs)
        self.callbacks_handler.register_callbacks(
            [self._checkpoint_callback(num_best_checkpoints_kept)], cache_callbacks=True
        )

    def _checkpoint_callback(self, num_best_checkpoints_kept: int) -> Any:
        from scramjet.compat.aitoolbox.torchtrain.callbacks.model_save import (
            ModelCheckpoint,
            ModelIterationCheckpoint,
        )

        args = (
            self.project_name,
            self.experiment_name,
            self.local_model_result_folder_path,
            self.hyperparams,
            self.cloud_save_mode,
            self.bucket_name,
            self.cloud_dir_prefix,
            self.rm_subopt_local_models,
            num_best_checkpoints_kept,
        )
        if self.iteration_save_freq:
            return ModelIterationCheckpoint(self.iteration_save_freq, *args)
        return ModelCheckpoint(*args)


class TrainLoopEndSave(TrainLoop):
    """A ``TrainLoop`` that saves the final model and the result packages' results at the end."""

    def __init__(
        self,
        model: nn.Module,
        train_loader: Any,
        validation_loader: Any,
        test_loader: Any,
        optimizer: Any,
        criterion: Any,
        project_name: str,
        experiment_name: str,
        local_model_result_folder_path: str,
        hyperparams: dict[str, Any] | None,
        val_result_package: Any = None,
        test_result_package: Any = None,
        cloud_save_mode: str | None = "s3",
        bucket_name: str = "model-result",
        cloud_dir_prefix: str = "",
        source_dirs: Sequence[str] = (),
        **loop_kwargs: Any,
    ) -> None:
        super().__init__(
            model, train_loader, validation_loader, test_loader, optimizer, criterion, **loop_kwargs
        )
        _check_packages_loaders(self, val_result_package, test_result_package)
        hyperparams = _hyperparams_dict(hyperparams)
        self.project_name, self.experiment_name = project_name, experiment_name
        self.local_model_result_folder_path = local_model_result_folder_path
        self.hyperparams = hyperparams
        self.val_result_package, self.test_result_package = val_result_package, test_result_package
        self.cloud_save_mode, self.bucket_name = cloud_save_mode, bucket_name
        self.cloud_dir_prefix, self.source_dirs = cloud_dir_prefix, source_dirs
        _note_sources(hyperparams, source_dirs)
        self.callbacks_handler.register_callbacks([self._end_save_callback()], cache_callbacks=True)

    def _end_save_callback(self) -> Any:
        from scramjet.compat.aitoolbox.torchtrain.callbacks.model_save import ModelTrainEndSave

        return ModelTrainEndSave(
            self.project_name,
            self.experiment_name,
            self.local_model_result_folder_path,
            self.hyperparams,
            self.val_result_package,
            self.test_result_package,
            self.cloud_save_mode,
            self.bucket_name,
            self.cloud_dir_prefix,
        )


class TrainLoopCheckpointEndSave(TrainLoopEndSave):
    """Checkpoints during training and saves the final model and results at the end."""

    def __init__(
        self,
        model: nn.Module,
        train_loader: Any,
        validation_loader: Any,
        test_loader: Any,
        optimizer: Any,
        criterion: Any,
        project_name: str,
        experiment_name: str,
        local_model_result_folder_path: str,
        hyperparams: dict[str, Any] | None,
        val_result_package: Any = None,
        test_result_package: Any = None,
        cloud_save_mode: str | None = "s3",
        bucket_name: str = "model-result",
        cloud_dir_prefix: str = "",
        source_dirs: Sequence[str] = (),
        rm_subopt_local_models: bool | str = False,
        num_best_checkpoints_kept: int = 2,
        iteration_save_freq: int = 0,
        **loop_kwargs: Any,
    ) -> None:
        _check_save_freq(iteration_save_freq)
        super().__init__(
            model, train_loader, validation_loader, test_loader, optimizer, criterion,
            project_name, experiment_name, local_model_result_folder_path, hyperparams,
            val_result_package, test_result_package, cloud_save_mode, bucket_name,
            cloud_dir_prefix, source_dirs, **loop_kwargs,
        )  # fmt: skip
        self.rm_subopt_local_models = rm_subopt_local_models
        self.iteration_save_freq = iteration_save_freq
        checkpoint = TrainLoopCheckpoint._checkpoint_callback(self, num_best_checkpoints_kept)  # type: ignore[arg-type]
        self.callbacks_handler.register_callbacks([checkpoint], cache_callbacks=True)
