"""Tracked TrainLoops and the saving callbacks, each backed by one :class:`Experiment`.

The run folder is ``<local_model_result_folder_path>/<project_name>/<experiment_name>_<time>_<id>/``
(unique even for runs started in the same second; the root is created). With
``cloud_save_mode="s3"`` (or ``"gcs"``) it is mirrored to
``s3://<bucket_name>/<cloud_dir_prefix>/<project_name>/<run folder>/`` in background
threads; the default ``None`` keeps everything local.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from scramjet.compat.aitoolbox.results import AbstractResultPackage
from scramjet.compat.aitoolbox.train_loop import TrainLoop, _TrackingCallback, make_experiment


def _packages(val: AbstractResultPackage | None, test: AbstractResultPackage | None) -> list[Any]:
    out = []
    if val is not None:
        out.append(("val", "validation", val))
    if test is not None:
        out.append(("test", "test", test))
    return out


class TrainLoopCheckpoint(TrainLoop):
    """``TrainLoop`` that saves a full training checkpoint after every epoch into a tracked run.

    ``iteration_save_freq=N`` checkpoints every N updates instead; ``num_best_checkpoints_kept``
    best checkpoints (by validation loss) are kept besides the newest one.
    ``source_dirs`` and ``rm_subopt_local_models`` are accepted for compatibility.
    """

    def __init__(
        self,
        model: nn.Module,
        train_loader: Any,
        validation_loader: Any,
        test_loader: Any,
        optimizer: torch.optim.Optimizer,
        criterion: Any,
        project_name: str,
        experiment_name: str,
        local_model_result_folder_path: str | os.PathLike[str],
        hyperparams: Mapping[str, Any] | None,
        cloud_save_mode: str | None = None,
        bucket_name: str = "models",
        cloud_dir_prefix: str = "",
        source_dirs: tuple[str, ...] = (),
        rm_subopt_local_models: bool = False,
        num_best_checkpoints_kept: int = 2,
        iteration_save_freq: int = 0,
        **loop_kwargs: Any,
    ) -> None:
        super().__init__(
            model, train_loader, validation_loader, test_loader, optimizer, criterion, **loop_kwargs
        )
        self.hyperparams = dict(hyperparams or {})
        self.experiment = make_experiment(
            project_name,
            experiment_name,
            local_model_result_folder_path,
            hyperparams,
            cloud_save_mode,
            bucket_name,
            cloud_dir_prefix,
            iteration_save_freq or "epoch",
            num_best_checkpoints_kept,
        )


class TrainLoopEndSave(TrainLoop):
    """``TrainLoop`` that saves the final model and evaluates result packages at the end."""

    def __init__(
        self,
        model: nn.Module,
        train_loader: Any,
        validation_loader: Any,
        test_loader: Any,
        optimizer: torch.optim.Optimizer,
        criterion: Any,
        project_name: str,
        experiment_name: str,
        local_model_result_folder_path: str | os.PathLike[str],
        hyperparams: Mapping[str, Any] | None,
        val_result_package: AbstractResultPackage | None = None,
        test_result_package: AbstractResultPackage | None = None,
        cloud_save_mode: str | None = None,
        bucket_name: str = "models",
        cloud_dir_prefix: str = "",
        source_dirs: tuple[str, ...] = (),
        **loop_kwargs: Any,
    ) -> None:
        super().__init__(
            model, train_loader, validation_loader, test_loader, optimizer, criterion, **loop_kwargs
        )
        self.hyperparams = dict(hyperparams or {})
        self.experiment = make_experiment(
            project_name,
            experiment_name,
            local_model_result_folder_path,
            hyperparams,
            cloud_save_mode,
            bucket_name,
            cloud_dir_prefix,
            "end",
            0,
        )
        for name, which, package in _packages(val_result_package, test_result_package):
            loader = getattr(self, f"{which}_loader")
            if loader is None:
                raise ValueError(f"{name}_result_package needs a {which}_loader; received None.")
            self.end_result_packages.append((name, loader, package))


class TrainLoopCheckpointEndSave(TrainLoopEndSave):
    """Checkpoints every epoch and saves model + result packages at the end (most complete)."""

    def __init__(
        self,
        model: nn.Module,
        train_loader: Any,
        validation_loader: Any,
        test_loader: Any,
        optimizer: torch.optim.Optimizer,
        criterion: Any,
        project_name: str,
        experiment_name: str,
        local_model_result_folder_path: str | os.PathLike[str],
        hyperparams: Mapping[str, Any] | None,
        val_result_package: AbstractResultPackage | None = None,
        test_result_package: AbstractResultPackage | None = None,
        cloud_save_mode: str | None = None,
        bucket_name: str = "models",
        cloud_dir_prefix: str = "",
        source_dirs: tuple[str, ...] = (),
        rm_subopt_local_models: bool = False,
        num_best_checkpoints_kept: int = 2,
        iteration_save_freq: int = 0,
        **loop_kwargs: Any,
    ) -> None:
        super().__init__(
            model,
            train_loader,
            validation_loader,
            test_loader,
            optimizer,
            criterion,
            project_name,
            experiment_name,
            local_model_result_folder_path,
            hyperparams,
            val_result_package,
            test_result_package,
            cloud_save_mode,
            bucket_name,
            cloud_dir_prefix,
            source_dirs,
            **loop_kwargs,
        )
        self.experiment = make_experiment(
            project_name,
            experiment_name,
            local_model_result_folder_path,
            hyperparams,
            cloud_save_mode,
            bucket_name,
            cloud_dir_prefix,
            iteration_save_freq or "epoch",
            num_best_checkpoints_kept,
        )


class ModelCheckpoint(_TrackingCallback):
    """Callback form of :class:`TrainLoopCheckpoint` for a plain ``TrainLoop``."""

    def __init__(
        self,
        project_name: str,
        experiment_name: str,
        local_model_result_folder_path: str | os.PathLike[str],
        hyperparams: Mapping[str, Any] | None,
        cloud_save_mode: str | None = None,
        bucket_name: str = "model-result",
        cloud_dir_prefix: str = "",
        rm_subopt_local_models: bool = False,
        num_best_checkpoints_kept: int = 2,
        iteration_save_freq: int = 0,
        **kwargs: Any,
    ) -> None:
        exp = make_experiment(
            project_name,
            experiment_name,
            local_model_result_folder_path,
            hyperparams,
            cloud_save_mode,
            bucket_name,
            cloud_dir_prefix,
            iteration_save_freq or "epoch",
            num_best_checkpoints_kept,
        )
        super().__init__("ModelCheckpoint", exp, hyperparams or {}, [])


class ModelTrainEndSave(_TrackingCallback):
    """Callback form of :class:`TrainLoopEndSave` for a plain ``TrainLoop``."""

    def __init__(
        self,
        project_name: str,
        experiment_name: str,
        local_model_result_folder_path: str | os.PathLike[str],
        hyperparams: Mapping[str, Any] | None,
        val_result_package: AbstractResultPackage | None = None,
        test_result_package: AbstractResultPackage | None = None,
        cloud_save_mode: str | None = None,
        bucket_name: str = "model-result",
        cloud_dir_prefix: str = "",
        **kwargs: Any,
    ) -> None:
        exp = make_experiment(
            project_name,
            experiment_name,
            local_model_result_folder_path,
            hyperparams,
            cloud_save_mode,
            bucket_name,
            cloud_dir_prefix,
            "end",
            0,
        )
        super().__init__(
            "ModelTrainEndSave",
            exp,
            hyperparams or {},
            _packages(val_result_package, test_result_package),
        )
