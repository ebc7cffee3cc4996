"""Tracked TrainLoops and the saving callbacks, each backed by one :class:`Experiment`.

The run folder is ``<local_model_result_folder_path>/<project_name>/<experiment_name>_<time>_<id>/``
(unique even for runs started in the same second; the root is created). With
``cloud_save_mode="s3"`` (or ``"gcs"``) it is mirrored to
``s3://<bucket_name>/<cloud_dir_prefix>/<project_name>/<run folder>/`` in background
threads; the default ``None`` keeps everything local.

The five constructors keep AIToolbox's signatures; the tracking parameters they share
are defined and checked once, in :class:`Tracking`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from scramjet.compat.aitoolbox.results import AbstractResultPackage
from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import AbstractCallback
from scramjet.compat.aitoolbox.train_loop import TrainLoop
from scramjet.tracking.experiment import Experiment


def storage_url(cloud_save_mode: str | None, bucket_name: str, cloud_dir_prefix: str) -> str | None:
    """``"s3"`` → ``s3://bucket/prefix``, ``"gcs"`` → ``gs://bucket/prefix``, None/"local" → None."""
    if cloud_save_mode in (None, "local", ""):
        return None
    schemes = {"s3": "s3", "aws_s3": "s3", "gcs": "gs", "google_storage": "gs", "gs": "gs"}
    if cloud_save_mode not in schemes:
        raise ValueError(
            f"cloud_save_mode must be 's3', 'gcs' or None (local only); received {cloud_save_mode!r}."
        )
    prefix = cloud_dir_prefix.strip("/")
    return f"{schemes[cloud_save_mode]}://{bucket_name}" + (f"/{prefix}" if prefix else "")


@dataclasses.dataclass(frozen=True)
class Tracking:
    """The tracking parameters shared by the tracked TrainLoops and the saving callbacks.

    Args:
        project_name: a folder under ``local_model_result_folder_path``.
        experiment_name: prefix of the run folder.
        local_model_result_folder_path: where runs are saved (created if missing).
        hyperparams: saved with the run and shown in its report.
        cloud_save_mode: ``"s3"``/``"aws_s3"``, ``"gcs"``/``"google_storage"``, or
            None/``"local"`` to keep the run local.
        bucket_name: the bucket the run is mirrored to.
        cloud_dir_prefix: a folder inside the bucket.
        val_result_package, test_result_package: evaluated on the validation/test loader at
            the end of training and saved as ``results/val.json``/``results/test.json``.
        num_best_checkpoints_kept: best checkpoints (by validation loss) kept besides the
            newest one.
        iteration_save_freq: checkpoint every N optimizer updates (0: every epoch).
        checkpoints: save full training checkpoints during training (else only the final
            model); set by the class, not an AIToolbox argument.
        source_dirs, rm_subopt_local_models: accepted for compatibility.
    """

    project_name: str
    experiment_name: str
    local_model_result_folder_path: str | os.PathLike[str]
    hyperparams: Mapping[str, Any] | None
    cloud_save_mode: str | None = None
    bucket_name: str = "models"
    cloud_dir_prefix: str = ""
    val_result_package: AbstractResultPackage | None = None
    test_result_package: AbstractResultPackage | None = None
    num_best_checkpoints_kept: int = 2
    iteration_save_freq: int = 0
    checkpoints: bool = True
    source_dirs: tuple[str, ...] = ()
    rm_subopt_local_models: bool = False

    def __post_init__(self) -> None:
        storage_url(self.cloud_save_mode, self.bucket_name, self.cloud_dir_prefix)
        for name in ("num_best_checkpoints_kept", "iteration_save_freq"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int ≥ 0; received {value!r}.")

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any], *, checkpoints: bool) -> Tracking:
        """The tracking parameters among a constructor's arguments (its ``locals()``)."""
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(checkpoints=checkpoints, **{k: v for k, v in arguments.items() if k in names})

    def experiment(self) -> Experiment:
        """The :class:`Experiment` that saves the run (nothing is written before training)."""
        return Experiment(
            self.project_name,
            self.experiment_name,
            root=self.local_model_result_folder_path,
            hyperparams=self.hyperparams,
            storage=storage_url(self.cloud_save_mode, self.bucket_name, self.cloud_dir_prefix),
            checkpoint=(self.iteration_save_freq or "epoch") if self.checkpoints else "end",
            keep_best=self.num_best_checkpoints_kept if self.checkpoints else 0,
            monitor="eval_loss_epoch",
        )

    def attach(self, loop: TrainLoop, experiment: Experiment) -> None:
        """Make ``loop`` save into ``experiment`` and evaluate the result packages at the end."""
        if loop.experiment is experiment:
            return
        if loop.experiment is not None:
            raise ValueError(
                "this TrainLoop already saves into a tracked run; use a plain TrainLoop with one "
                "saving callback (ModelCheckpoint or ModelTrainEndSave), or drop the callback."
            )
        loop.experiment, loop.hyperparams = experiment, dict(self.hyperparams or {})
        packages = (
            ("val", "validation", self.val_result_package),
            ("test", "test", self.test_result_package),
        )
        for name, which, package in packages:
            if package is None:
                continue
            loader = getattr(loop, f"{which}_loader")
            if loader is None:
                raise ValueError(f"{name}_result_package needs a {which}_loader; received None.")
            loop.end_result_packages.append((name, loader, package))


class TrainLoopCheckpoint(TrainLoop):
    """``TrainLoop`` that saves a full training checkpoint after every epoch into a tracked run.

    ``iteration_save_freq=N`` checkpoints every N updates instead; ``num_best_checkpoints_kept``
    best checkpoints (by validation loss) are kept besides the newest one. The tracking
    arguments are described in :class:`Tracking`.
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
        tracking = Tracking.from_arguments(locals(), checkpoints=True)
        super().__init__(
            model, train_loader, validation_loader, test_loader, optimizer, criterion, **loop_kwargs
        )
        tracking.attach(self, tracking.experiment())


class TrainLoopEndSave(TrainLoop):
    """``TrainLoop`` that saves the final model and evaluates result packages at the end.

    The tracking arguments are described in :class:`Tracking`.
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
        val_result_package: AbstractResultPackage | None = None,
        test_result_package: AbstractResultPackage | None = None,
        cloud_save_mode: str | None = None,
        bucket_name: str = "models",
        cloud_dir_prefix: str = "",
        source_dirs: tuple[str, ...] = (),
        **loop_kwargs: Any,
    ) -> None:
        tracking = Tracking.from_arguments(locals(), checkpoints=False)
        super().__init__(
            model, train_loader, validation_loader, test_loader, optimizer, criterion, **loop_kwargs
        )
        tracking.attach(self, tracking.experiment())


class TrainLoopCheckpointEndSave(TrainLoopEndSave):
    """Checkpoints every epoch and saves model + result packages at the end (most complete).

    The tracking arguments are described in :class:`Tracking`.
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
        tracking = Tracking.from_arguments(locals(), checkpoints=True)
        # TrainLoopEndSave.__init__ would track the loop without checkpoints: start plain.
        TrainLoop.__init__(
            self,
            model,
            train_loader,
            validation_loader,
            test_loader,
            optimizer,
            criterion,
            **loop_kwargs,
        )
        tracking.attach(self, tracking.experiment())


class _TrackingCallback(AbstractCallback):
    """A callback that turns a plain TrainLoop into a tracked run when ``fit`` registers it."""

    def __init__(self, name: str, tracking: Tracking) -> None:
        super().__init__(name)
        self.tracking, self.experiment = tracking, tracking.experiment()
        self.hyperparams = dict(tracking.hyperparams or {})

    def on_train_loop_registration(self) -> None:
        """Make the TrainLoop tracked by this callback's Experiment."""
        assert self.train_loop_obj is not None
        self.tracking.attach(self.train_loop_obj, self.experiment)


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
        super().__init__("ModelCheckpoint", Tracking.from_arguments(locals(), checkpoints=True))


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
        super().__init__("ModelTrainEndSave", Tracking.from_arguments(locals(), checkpoints=False))
