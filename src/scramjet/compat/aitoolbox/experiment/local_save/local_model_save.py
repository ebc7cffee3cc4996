"""AIToolbox's local model savers over scramjet's checkpoint files.

A PyTorch model checkpoint (``{"model_state_dict", "optimizer_state_dict", "epoch",
"hyperparams", ...}``) is written with :func:`scramjet.checkpoint.write_checkpoint`:
the same atomic, checksummed file every scramjet checkpoint is, read back with
:class:`~scramjet.compat.aitoolbox.experiment.local_load.local_model_load.PyTorchLocalModelLoader`
or :func:`scramjet.checkpoint.read_checkpoint`. Files are named as AIToolbox names them:
``<root>/<project>/<experiment>_<timestamp>/{checkpoint_model|model}/model_<experiment>_<timestamp>[_E<epoch>].pth``.
"""

from __future__ import annotations

import datetime
import os
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from scramjet.checkpoint.manager import write_checkpoint
from scramjet.checkpoint.payload import to_storable
from scramjet.compat.aitoolbox.experiment._paths import experiment_subdir, timestamp_now
from scramjet.compat.aitoolbox.experiment.training_history import lower_is_better

# ``datetime``, ``os`` and ``time`` are listed because AIToolbox's module had no __all__, so
# ``from ...local_model_save import *`` gave them to code written against it.
__all__ = [
    "AbstractLocalModelSaver",
    "BaseLocalModelSaver",
    "KerasLocalModelSaver",
    "LocalSubOptimalModelRemover",
    "PyTorchLocalModelSaver",
    "datetime",
    "keras_unsupported",
    "os",
    "time",
]

REQUIRED_CHECKPOINT_KEYS = ("model_state_dict", "optimizer_state_dict", "epoch", "hyperparams")


def storable_hyperparams(value: Any, where: str, replaced: list[str]) -> Any:
    """``value`` with what a checkpoint cannot hold (functions, classes, ...) as its text.

    AIToolbox pickled the hyperparameters with the checkpoint, so a function or a class
    among them (``{"activation": torch.relu}``) was saved; a scramjet checkpoint holds only
    data, so such a value is kept as its ``repr`` (as ``hyperparams_list.txt`` shows it)
    and its place is appended to ``replaced``.
    """
    if isinstance(value, Mapping):
        return {k: storable_hyperparams(v, f"{where}[{k!r}]", replaced) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [storable_hyperparams(v, f"{where}[{i}]", replaced) for i, v in enumerate(value)]
        return items if isinstance(value, list) or hasattr(value, "_fields") else tuple(items)
    try:
        to_storable(value, where)
    except TypeError:
        replaced.append(where)
        return repr(value)
    return value


def with_storable_hyperparams(model: Mapping[str, Any]) -> dict[str, Any]:
    """The checkpoint dict with its ``hyperparams`` made storable; warns about what changed."""
    replaced: list[str] = []
    hyperparams = storable_hyperparams(model["hyperparams"], "hyperparams", replaced)
    if replaced:
        warnings.warn(
            f"{', '.join(replaced)}: the checkpoint keeps these hyperparameters as text (their "
            f"repr), because a checkpoint holds data, not functions or objects. To keep them "
            f"loadable, save a name or a number instead (e.g. 'relu' for torch.relu).",
            UserWarning,
            stacklevel=3,
        )
    return {**model, "hyperparams": hyperparams}


def keras_unsupported(what: str) -> TypeError:
    """The error every Keras saver raises: scramjet trains and saves PyTorch models only."""
    return TypeError(
        f"{what}: Keras models are not supported; scramjet trains and saves PyTorch models. "
        f"Use the PyTorch saver with a checkpoint dict instead."
    )


def model_file_name(
    experiment_name: str,
    timestamp: str,
    epoch: int | None,
    ext: str,
    iteration_idx: int | None = None,
) -> str:
    """``model_<experiment>_<timestamp>[_E<epoch>][_ITER<iteration>]<ext>``."""
    suffix = f"_E{epoch}" if epoch is not None else ""
    suffix += f"_ITER{iteration_idx}" if iteration_idx is not None else ""
    return f"model_{experiment_name}_{timestamp}{suffix}{ext}"


class AbstractLocalModelSaver(ABC):
    """Interface of the local model savers."""

    @abstractmethod
    def save_model(
        self,
        model: Any,
        project_name: str,
        experiment_name: str,
        experiment_timestamp: str | None = None,
        epoch: int | None = None,
        protect_existing_folder: bool = True,
    ) -> tuple[str, str]:
        """Save ``model``; return ``(file name, local path)``."""


class BaseLocalModelSaver:
    """The models folder of an experiment.

    Args:
        local_model_result_folder_path: root of the experiments (``~`` is expanded).
        checkpoint_model: save into ``checkpoint_model/`` (during training) instead of
            ``model/`` (the final model).
    """

    def __init__(
        self,
        local_model_result_folder_path: str = "~/project/model_result",
        checkpoint_model: bool = False,
    ) -> None:
        self.local_model_result_folder_path = os.path.expanduser(local_model_result_folder_path)
        self.checkpoint_model = checkpoint_model

    def create_experiment_local_models_folder(
        self, project_name: str, experiment_name: str, experiment_timestamp: str
    ) -> str:
        """Create ``checkpoint_model/`` or ``model/`` of the experiment; return its path."""
        sub = "checkpoint_model" if self.checkpoint_model else "model"
        return experiment_subdir(
            self.local_model_result_folder_path,
            project_name,
            experiment_name,
            experiment_timestamp,
            sub,
        )


class PyTorchLocalModelSaver(BaseLocalModelSaver, AbstractLocalModelSaver):
    """Saves a PyTorch checkpoint dict as a scramjet checkpoint file."""

    def save_model(
        self,
        model: Any,
        project_name: str,
        experiment_name: str,
        experiment_timestamp: str | None = None,
        epoch: int | None = None,
        protect_existing_folder: bool = True,
        iteration_idx: int | None = None,
    ) -> tuple[str, str]:
        """Write ``model`` (the checkpoint dict); return ``(file name, local path)``.

        The dict's keys (``model_state_dict``, ``optimizer_state_dict``, ``epoch``,
        ``iteration_idx``, ...) are at the file's top level, as AIToolbox writes them, so
        ``torch.load(path)["model_state_dict"]`` works; the file is a scramjet checkpoint
        too (atomic, checksummed). ``iteration_idx`` names an in-epoch checkpoint
        ``..._E<epoch>_ITER<iteration>.pth``.

        Hyperparameters a checkpoint cannot hold (functions, classes) are saved as their
        text, with a warning (see :func:`storable_hyperparams`).

        Raises:
            ValueError: a required key is missing (see :meth:`check_model_dict_contents`).
        """
        self.check_model_dict_contents(model)
        model = with_storable_hyperparams(model)
        stamp = experiment_timestamp or timestamp_now()
        folder = self.create_experiment_local_models_folder(project_name, experiment_name, stamp)
        name = model_file_name(experiment_name, stamp, epoch, ".pth", iteration_idx)
        path = os.path.join(folder, name)
        saved_epoch = model.get("epoch")
        write_checkpoint(
            path,
            model,
            epoch=saved_epoch if isinstance(saved_epoch, int) else None,
            top_level=list(model),
        )
        return name, path

    @staticmethod
    def check_model_dict_contents(model: Any) -> None:
        """Raise :class:`ValueError` unless ``model`` is a dict with the checkpoint keys."""
        missing = (
            [k for k in REQUIRED_CHECKPOINT_KEYS if k not in model]
            if isinstance(model, Mapping)
            else list(REQUIRED_CHECKPOINT_KEYS)
        )
        if missing:
            raise ValueError(
                f"the model checkpoint must be a dict with keys {list(REQUIRED_CHECKPOINT_KEYS)}; "
                f"missing {missing} in the received {type(model).__name__}. Build it as "
                f"{{'model_state_dict': model.state_dict(), 'optimizer_state_dict': "
                f"optimizer.state_dict(), 'epoch': epoch, 'hyperparams': hyperparams}}."
            )


class KerasLocalModelSaver(BaseLocalModelSaver, AbstractLocalModelSaver):
    """AIToolbox's Keras saver: the name is kept, saving raises (PyTorch models only)."""

    def save_model(
        self,
        model: Any,
        project_name: str,
        experiment_name: str,
        experiment_timestamp: str | None = None,
        epoch: int | None = None,
        protect_existing_folder: bool = True,
    ) -> tuple[str, str]:
        """Raises :class:`TypeError`: Keras models are not supported."""
        raise keras_unsupported("KerasLocalModelSaver.save_model")


class LocalSubOptimalModelRemover:
    """Keeps the ``num_best_kept`` best saved checkpoints by a history metric; deletes the rest.

    A metric is better when lower if its name says it is an error (:func:`lower_is_better`:
    ``loss``, ``error``, ``mse``, ...), else when higher. The default metrics (the losses a
    TrainLoop records) are known when a checkpoint is saved. Another metric ranks the
    checkpoint of epoch n by its value of epoch n (a TrainLoop's history keeps each value's
    epoch), whether recorded before the checkpoint call (a callback that runs first, as
    ``ModelPerformanceEvaluation`` does before ``ModelCheckpoint``) or after it; a
    checkpoint whose epoch ended without a value (a metric evaluated every few epochs)
    cannot rank and is deleted. Without epochs (a plain dict history), the n-th checkpoint
    is ranked by the n-th value.

    Args:
        metric_name: the training-history metric to rank by.
        num_best_kept: how many checkpoints to keep.
    """

    default_metrics_list = ("loss", "accumulated_loss", "val_loss", "train_end_test_loss")

    def __init__(self, metric_name: str, num_best_kept: int = 2) -> None:
        if num_best_kept < 1:
            raise ValueError(f"num_best_kept must be at least 1; received {num_best_kept}.")
        self.metric_name = metric_name
        self.num_best_kept = num_best_kept
        self.decrease_metric = lower_is_better(metric_name)
        self.is_default_metric = metric_name in self.default_metrics_list
        self.model_save_history: list[tuple[list[str], float]] = []
        self.non_default_metric_buffer: list[str] | None = None
        self._pending: list[tuple[int, list[str]]] = []  # (checkpoint number, paths)
        self._calls = 0

    def decide_if_remove_suboptimal_model(
        self,
        history: Mapping[str, list[float]],
        new_model_dump_paths: list[str],
        epoch: int | None = None,
    ) -> None:
        """Record the newest checkpoint's score and delete the ones that fell out of the
        best; ``epoch`` is the checkpoint's (the n-th call's is taken as n without it)."""
        values = history.get(self.metric_name) or []
        epochs_of = getattr(history, "epochs_of", None)
        epochs = epochs_of(self.metric_name) if callable(epochs_of) else None
        if self.is_default_metric:
            if not values:
                raise ValueError(
                    f"rm_subopt_local_models ranks checkpoints by {self.metric_name!r}, which "
                    f"the training history has not recorded (it has: {sorted(history)}); pass "
                    "rm_subopt_local_models=<one of those names>, or give the TrainLoop a "
                    "validation loader for 'val_loss'."
                )
            self.model_save_history.append((new_model_dump_paths, values[-1]))
        elif epoch is not None and epochs is not None and None not in epochs:
            self._rank_by_epoch(dict(zip(epochs, values, strict=True)), new_model_dump_paths, epoch)
        else:
            self._pending.append((self._calls, new_model_dump_paths))
            waiting = []
            for number, paths in self._pending:
                if number < len(values):
                    self.model_save_history.append((paths, values[number]))
                else:
                    waiting.append((number, paths))
            self._pending = waiting
            self.non_default_metric_buffer = waiting[-1][1] if waiting else None
        self._calls += 1
        self._keep_best()

    def _rank_by_epoch(
        self, by_epoch: dict[int | None, float], paths: list[str], epoch: int
    ) -> None:
        self._pending.append((epoch, paths))
        waiting = []
        for number, pending in self._pending:
            if number in by_epoch:  # the last value recorded in that epoch
                self.model_save_history.append((pending, by_epoch[number]))
            elif number < epoch:  # its epoch ended without a value: it cannot rank
                self.rm_suboptimal_model(pending)
            else:
                waiting.append((number, pending))
        self._pending = waiting
        self.non_default_metric_buffer = waiting[-1][1] if waiting else None

    def _keep_best(self) -> None:
        if len(self.model_save_history) > self.num_best_kept:
            ranked = sorted(
                self.model_save_history, key=lambda item: item[1], reverse=not self.decrease_metric
            )
            self.model_save_history = ranked[: self.num_best_kept]
            for paths, _ in ranked[self.num_best_kept :]:
                self.rm_suboptimal_model(paths)

    def rm_suboptimal_model(self, rm_model_paths: list[str]) -> None:
        """Delete the files of a checkpoint that is no longer among the best."""
        for path in rm_model_paths:
            if os.path.isfile(path):
                os.remove(path)
