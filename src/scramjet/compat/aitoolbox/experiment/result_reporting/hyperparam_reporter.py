"""AIToolbox's hyperparameter reporter: a text file of the hyperparameters in the experiment folder."""

from __future__ import annotations

import os
import shutil
import warnings
import zipfile
from collections.abc import Mapping
from typing import Any

from scramjet.compat.aitoolbox.experiment._paths import experiment_dir
from scramjet.runtime.files import atomic_write_text

__all__ = ["HyperParamSourceReporter"]


class HyperParamSourceReporter:
    """Writes ``hyperparams_list.txt`` (``name:<TAB>value`` lines) and copies source files
    (the training script, and ``source_code.zip`` with the ``source_dirs`` folders).

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

    def save_experiment_python_file(self, hyperparams: Mapping[str, Any]) -> str | None:
        """Copy ``hyperparams['experiment_file_path']`` into the experiment folder.

        Returns:
            The copy's path; None (with a warning) when the key is missing or names no file.
        """
        path = hyperparams.get("experiment_file_path")
        if path is None or not os.path.isfile(path):
            warnings.warn(
                f"experiment_file_path is {path!r}, not an existing file, so the training script "
                f"is not copied into the experiment folder. In a notebook, set "
                f"hyperparams['experiment_file_path'] to the script's path.",
                stacklevel=2,
            )
            return None
        return self.save_experiment_python_source(path)

    def save_experiment_source_files(self, hyperparams: Mapping[str, Any]) -> str | None:
        """Zip the folders of ``hyperparams['source_dirs_paths']`` into ``source_code.zip``.

        Each folder is stored under its own name in the archive, which is written in the
        experiment folder (atomically: a crash never leaves half an archive).

        Returns:
            The archive's path; None when no source folders are listed.

        Raises:
            FileNotFoundError: a listed folder does not exist.
        """
        folders = hyperparams.get("source_dirs_paths")
        if not isinstance(folders, list | tuple) or not folders:
            return None
        missing = [f for f in folders if not os.path.isdir(os.path.expanduser(f))]
        if missing:
            raise FileNotFoundError(
                f"source_dirs lists folders that do not exist: {missing}; expected folders of "
                f"the experiment's source code. Fix the paths or leave them out of source_dirs."
            )
        os.makedirs(self.experiment_dir_path, exist_ok=True)
        target = os.path.join(self.experiment_dir_path, "source_code.zip")
        partial = f"{target}.part"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for folder in folders:
                root = os.path.expanduser(folder).rstrip(os.sep)
                name = os.path.basename(root)
                for here, _, files in sorted(os.walk(root)):
                    for file in sorted(files):
                        path = os.path.join(here, file)
                        archive.write(path, os.path.join(name, os.path.relpath(path, root)))
        os.replace(partial, target)
        return target
