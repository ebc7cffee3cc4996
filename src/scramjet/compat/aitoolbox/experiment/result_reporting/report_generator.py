"""AIToolbox's training-history report writer: one block (text) or row (TSV) per epoch."""

from __future__ import annotations

import os
from typing import Any

from scramjet.runtime.files import atomic_write_text

__all__ = ["TrainingHistoryWriter"]

_RULE = "=" * 28


def _latest(training_history: Any) -> dict[str, Any]:
    """The newest value of every metric that has one, in history order."""
    history = (
        training_history.get_train_history()
        if hasattr(training_history, "get_train_history")
        else training_history
    )
    return {name: values[-1] for name, values in dict(history).items() if len(values) > 0}


class TrainingHistoryWriter:
    """Appends the epoch's newest metric values to a text or TSV file in the results folder.

    Args:
        experiment_results_local_path: the experiment's results folder.
    """

    def __init__(self, experiment_results_local_path: str) -> None:
        self.experiment_results_local_path = experiment_results_local_path
        self.metric_name_cols: dict[str, list[str]] = {}

    def generate_report(
        self,
        training_history: Any,
        epoch: int,
        file_name: str,
        results_folder_name: str = "",
        file_format: str = "txt",
    ) -> tuple[str, str]:
        """Append this epoch's values; returns (path inside the results folder, local path).

        Raises:
            ValueError: ``file_format`` is not ``"txt"`` or ``"tsv"``.
        """
        if file_format not in ("txt", "tsv"):
            raise ValueError(f"file_format must be 'txt' or 'tsv'; received {file_format!r}.")
        rel = os.path.join(results_folder_name, file_name) if results_folder_name else file_name
        path = os.path.join(self.experiment_results_local_path, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        values = _latest(training_history)
        block = self._tsv(path, epoch, values) if file_format == "tsv" else self._txt(epoch, values)
        previous = ""
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                previous = f.read()
        atomic_write_text(path, previous + block)
        return rel, path

    @staticmethod
    def _txt(epoch: int, values: dict[str, Any]) -> str:
        lines = [_RULE, f"Epoch: {epoch}", _RULE, *(f"{k}:\t{v}" for k, v in values.items())]
        return "\n".join(lines) + "\n\n\n"

    def _tsv(self, path: str, epoch: int, values: dict[str, Any]) -> str:
        names = list(values)
        known = self.metric_name_cols.get(path)
        out = []
        if known is None or not os.path.isfile(path):
            out.append("\t".join(["Epoch", *names]))
        elif names != known:
            out += ["NEW_METRICS_DETECTED", "\t".join(["Epoch", *names])]
        self.metric_name_cols[path] = names
        out.append("\t".join([str(epoch), *(str(values[n]) for n in names)]))
        return "\n".join(out) + "\n"
