"""AIToolbox's local model loader over scramjet's checkpoint files."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Any

import torch

from scramjet.checkpoint.manager import read_checkpoint
from scramjet.checkpoint.payload import from_storable
from scramjet.compat.aitoolbox.experiment._paths import experiment_dir
from scramjet.compat.aitoolbox.experiment.local_save.local_model_save import model_file_name

__all__ = ["AbstractLocalModelLoader", "PyTorchLocalModelLoader"]


class AbstractLocalModelLoader(ABC):
    """Interface of the local model loaders."""

    @abstractmethod
    def load_model(self, *args: Any, **kwargs: Any) -> Any:
        """Read a saved model."""

    @abstractmethod
    def init_model(self, model: Any, **kwargs: Any) -> Any:
        """Put the loaded weights into ``model``."""


def _strip_module_prefix(state: dict[str, Any]) -> dict[str, Any]:
    return {k[len("module.") :] if k.startswith("module.") else k: v for k, v in state.items()}


class PyTorchLocalModelLoader(AbstractLocalModelLoader):
    """Reads a checkpoint written by ``PyTorchLocalModelSaver`` (or any scramjet checkpoint).

    Args:
        local_model_result_folder_path: root of the experiments (``~`` is expanded).
    """

    def __init__(self, local_model_result_folder_path: str) -> None:
        self.local_model_result_folder_path = os.path.expanduser(local_model_result_folder_path)
        self.model_representation: dict[str, Any] | None = None

    def load_model(
        self,
        project_name: str,
        experiment_name: str,
        experiment_timestamp: str,
        model_save_dir: str = "checkpoint_model",
        epoch_num: int | None = None,
        map_location: str | torch.device | None = "cpu",
    ) -> dict[str, Any]:
        """Read ``<experiment>/<model_save_dir>/model_<experiment>_<timestamp>[_E<epoch>].pth``.

        Returns:
            The saved checkpoint dict (also kept as ``model_representation``).
        """
        folder = os.path.join(
            experiment_dir(
                self.local_model_result_folder_path,
                project_name,
                experiment_name,
                experiment_timestamp,
            ),
            model_save_dir,
        )
        path = os.path.join(
            folder, model_file_name(experiment_name, experiment_timestamp, epoch_num, ".pth")
        )
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"no saved model at {path}; check project_name, experiment_name, "
                f"experiment_timestamp, model_save_dir ('checkpoint_model' or 'model') and epoch_num."
            )
        return self.load_model_from_path(path, map_location)

    def load_model_from_path(
        self, path: str, map_location: str | torch.device | None = "cpu"
    ) -> dict[str, Any]:
        """Read the checkpoint file at ``path`` (numpy arrays come back as arrays)."""
        state = read_checkpoint(path, map_location=map_location)["state"]
        self.model_representation = dict(from_storable(dict(state)))
        return self.model_representation

    def _loaded(self) -> dict[str, Any]:
        if self.model_representation is None:
            raise ValueError("no model is loaded yet; call load_model(...) first.")
        return self.model_representation

    def init_model(self, model: Any, used_data_parallel: bool = False, **kwargs: Any) -> Any:
        """Load the saved weights into ``model`` (``module.`` prefixes removed if asked)."""
        state = self._loaded()["model_state_dict"]
        model.load_state_dict(_strip_module_prefix(state) if used_data_parallel else state)
        return model

    def init_optimizer(self, optimizer: Any, device: Any = None) -> Any:
        """Load the saved optimizer state into ``optimizer``."""
        optimizer.load_state_dict(self._loaded()["optimizer_state_dict"])
        return optimizer

    def init_amp(self, amp_scaler: Any) -> Any:
        """Load the saved AMP ``GradScaler`` state into ``amp_scaler`` (kept as is when none was saved)."""
        saved = self._loaded().get("amp")
        if saved:
            amp_scaler.load_state_dict(saved)
        return amp_scaler

    def init_scheduler(
        self, scheduler_callbacks_list: list[Any], ignore_saved: bool = False
    ) -> list[Any]:
        """Load saved scheduler states into the scheduler callbacks, in order."""
        saved = self._loaded().get("schedulers_state_dict") or []
        if not ignore_saved:
            for callback, state in zip(scheduler_callbacks_list, saved, strict=False):
                callback.load_state_dict(state)
        return scheduler_callbacks_list
