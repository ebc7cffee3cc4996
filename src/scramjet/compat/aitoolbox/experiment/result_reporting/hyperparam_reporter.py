"""AIToolbox's hyperparameter reporter: a text file of the hyperparameters in the experiment folder."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from typing import Any

from scramjet.compat.aitoolbox.experiment._paths import experiment_dir
from scramjet.runtime.files import atomic_write_text

__all__ = ["HyperParamSourceReporter"]


class HyperParamSourceReporter:
    """Writes ``hyperparams_list.txt`` (``name:<TAB>value`` lines) and copies source files.

    Args:
        project_name: folder of the project.
        experiment_name: prefix of the experiment folder.
        experiment_timestamp: suffix of the experiment folder.
        local_model_result_folder_path: root of the experiments (``~`` is expanded).
    """

    def __init__(
        self,
        project_name: str,
        experiment_name: str,
        experiment_timestamp: str,
        local_model_result_folder_path: str,
    ) -> None:
        root = os.path.expanduser(local_model_result_folder_path)
        self.experiment_dir_path = experiment_dir(
            root, project_name, experiment_name, experiment_timestamp
        )
        self.file_name = "hyperparams_list.txt"
        self.local_hyperparams_file_path = os.path.join(self.experiment_dir_path, self.file_name)

    def save_hyperparams_to_text_file(
        self, hyperparams: Mapping[str, Any], sort_names: bool = False
    ) -> str:
        """Write one ``name:<TAB>value`` line per hyperparameter; return the file's path."""
        names = sorted(hyperparams) if sort_names else list(hyperparams)
        text = "".join(f"{name}:\t{hyperparams[name]}\n" for name in names)
        os.makedirs(self.experiment_dir_path, exist_ok=True)
        atomic_write_text(self.local_hyperparams_file_path, text)
        return self.local_hyperparams_file_path

    def save_experiment_python_source(self, file_path: str, file_name: str | None = None) -> str:
        """Copy ``file_path`` (e.g. the training script) into the experiment folder."""
        os.makedirs(self.experiment_dir_path, exist_ok=True)
        target = os.path.join(self.experiment_dir_path, file_name or os.path.basename(file_path))
        shutil.copyfile(file_path, target)
        return target
