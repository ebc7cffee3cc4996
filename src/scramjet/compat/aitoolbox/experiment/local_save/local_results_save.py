"""AIToolbox's local results saver: results, hyperparameters and history as pickle or JSON.

Files go to ``<root>/<project>/<experiment>_<timestamp>/results/`` and are written
atomically (:func:`scramjet.runtime.files.atomic_write`): a crash never leaves half a file.
"""

from __future__ import annotations

import json
import os
import pickle
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from scramjet.compat.aitoolbox.experiment._paths import experiment_dir, timestamp_now
from scramjet.runtime.files import atomic_write

__all__ = ["AbstractLocalResultsSaver", "BaseLocalResultsSaver", "LocalResultsSaver"]

_EXTENSIONS = {"pickle": ".p", "json": ".json"}


def _json_default(value: Any) -> Any:
    if isinstance(value, np.ndarray | torch.Tensor):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable; use file_format='pickle'.")


def history_dict(training_history: Any) -> Any:
    """A TrainingHistory's plain dict (``get_train_history()``); other values as given."""
    getter = getattr(training_history, "get_train_history", None)
    return getter() if callable(getter) else training_history


def _plot_training_history(training_history: Any, results_dir: str) -> list[list[str]]:
    """``results/plots/<metric>.png`` per history metric with a curve (2+ values); ``[[name, path]]``.

    A single value (``train_end_test_loss``, recorded once) makes no curve and is not plotted.
    """
    history = history_dict(training_history)
    if not isinstance(history, Mapping):
        return []
    curves = {k: v for k, v in history.items() if isinstance(v, list | tuple) and len(v) > 1}
    if not curves:
        return []
    from scramjet.compat.aitoolbox.torchtrain.callbacks.performance_eval import plot_history

    saved = plot_history(curves, os.path.join(results_dir, "plots"), "png")
    return [[name, path] for name, path in saved]


class AbstractLocalResultsSaver:
    """Interface of the local results savers."""

    def save_experiment_results(self, *args: Any, **kwargs: Any) -> list[list[str]]:
        """Save the results of one experiment; returns ``[[file_name, file_path], ...]``."""
        raise NotImplementedError

    def save_experiment_results_separate_files(self, *args: Any, **kwargs: Any) -> list[list[str]]:
        """Like :meth:`save_experiment_results`, one file per kind of content."""
        raise NotImplementedError


class BaseLocalResultsSaver:
    """Folder layout and file writing of the local results savers.

    Args:
        local_model_result_folder_path: root of the experiments (``~`` is expanded).
        file_format: ``"pickle"`` (``.p``) or ``"json"``; anything else falls back to pickle
            with a warning.
    """

    def __init__(
        self,
        local_model_result_folder_path: str = "~/project/model_result",
        file_format: str = "pickle",
    ) -> None:
        self.local_model_result_folder_path = os.path.expanduser(local_model_result_folder_path)
        if file_format not in _EXTENSIONS:
            warnings.warn(
                f"file_format {file_format!r} is not supported; saving as 'pickle' "
                f"(choose 'pickle' or 'json').",
                stacklevel=2,
            )
            file_format = "pickle"
        self.file_format = file_format

    def create_experiment_local_folder_structure(
        self, project_name: str, experiment_name: str, experiment_timestamp: str
    ) -> str:
        """Create the experiment's ``results`` folder (and parents); return its path."""
        paths = self.get_experiment_local_results_folder_paths(
            project_name, experiment_name, experiment_timestamp, self.local_model_result_folder_path
        )
        os.makedirs(paths[2], exist_ok=True)
        return paths[2]

    @staticmethod
    def get_experiment_local_results_folder_paths(
        project_name: str,
        experiment_name: str,
        experiment_timestamp: str,
        local_model_result_folder_path: str,
    ) -> tuple[str, str, str]:
        """``(project folder, experiment folder, results folder)``."""
        root = os.path.expanduser(local_model_result_folder_path)
        exp = experiment_dir(root, project_name, experiment_name, experiment_timestamp)
        return os.path.join(root, project_name), exp, os.path.join(exp, "results")

    def save_file(
        self, result_dict: Any, file_name_wo_type: str, file_local_path_wo_type: str
    ) -> tuple[str, str]:
        """Write ``result_dict`` to ``<path>.p`` or ``<path>.json``; return (name, path).

        Raises:
            ValueError: ``file_format`` was changed to an unsupported value.
        """
        if self.file_format not in _EXTENSIONS:
            raise ValueError(f"file_format is {self.file_format!r}; set it to 'pickle' or 'json'.")
        ext = _EXTENSIONS[self.file_format]
        path = file_local_path_wo_type + ext
        if self.file_format == "json":
            text = json.dumps(result_dict, default=_json_default)
            atomic_write(path, lambda f: f.write(text.encode("utf-8")))
        else:
            atomic_write(path, lambda f: pickle.dump(result_dict, f))
        return file_name_wo_type + ext, path


class LocalResultsSaver(BaseLocalResultsSaver, AbstractLocalResultsSaver):
    """Saves a result package's results, hyperparameters and the training history locally."""

    def _prepare(
        self, project_name: str, experiment_name: str, experiment_timestamp: str | None
    ) -> tuple[str, str]:
        stamp = experiment_timestamp or timestamp_now()
        return stamp, self.create_experiment_local_folder_structure(
            project_name, experiment_name, stamp
        )

    def save_experiment_results(
        self,
        result_package: Any,
        training_history: Any,
        project_name: str,
        experiment_name: str,
        experiment_timestamp: str | None = None,
        save_true_pred_labels: bool = False,
    ) -> list[list[str]]:
        """One file ``results_hyperParams_hist_<experiment>_<timestamp>``.

        Returns:
            ``[[file_name, file_path]]`` followed by the package's additional files.
        """
        stamp, results_dir = self._prepare(project_name, experiment_name, experiment_timestamp)
        content: dict[str, Any] = {}
        if save_true_pred_labels:  # first, as in AIToolbox's files
            content.update(y_true=result_package.y_true, y_predicted=result_package.y_predicted)
        content |= {
            "experiment_name": experiment_name,
            "experiment_results_local_path": results_dir,
            "results": result_package.get_results(),
            "hyperparameters": result_package.get_hyperparameters(),
            "training_history": history_dict(training_history),
        }
        name = f"results_hyperParams_hist_{experiment_name}_{stamp}"
        saved = [list(self.save_file(content, name, os.path.join(results_dir, name)))]
        saved += _plot_training_history(training_history, results_dir)
        return saved + (result_package.get_additional_results_dump_paths() or [])

    def save_experiment_results_separate_files(
        self,
        result_package: Any,
        training_history: Any,
        project_name: str,
        experiment_name: str,
        experiment_timestamp: str | None = None,
        save_true_pred_labels: bool = False,
    ) -> list[list[str]]:
        """Files ``results_``, ``hyperparams_``, ``train_history_`` (and ``true_pred_labels_``)."""
        stamp, results_dir = self._prepare(project_name, experiment_name, experiment_timestamp)
        head = {"experiment_name": experiment_name, "experiment_results_local_path": results_dir}
        parts: list[tuple[str, dict[str, Any]]] = [
            ("results", {"results": result_package.get_results()}),
            ("hyperparams", {"hyperparameters": result_package.get_hyperparameters()}),
            ("train_history", {"training_history": history_dict(training_history)}),
        ]
        if save_true_pred_labels:
            labels = {"y_true": result_package.y_true, "y_predicted": result_package.y_predicted}
            parts.append(("true_pred_labels", labels))
        saved = []
        for prefix, body in parts:
            name = f"{prefix}_{experiment_name}_{stamp}"
            saved.append(
                list(self.save_file({**head, **body}, name, os.path.join(results_dir, name)))
            )
        saved += _plot_training_history(training_history, results_dir)
        return saved + (result_package.get_additional_results_dump_paths() or [])
