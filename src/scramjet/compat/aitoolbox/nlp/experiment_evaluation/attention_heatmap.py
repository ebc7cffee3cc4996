"""Attention heatmaps of sequence-to-sequence models: one PNG per validation example.

:func:`plot_attention_heatmap` draws one attention matrix (target tokens down, source
tokens across) with matplotlib's object API (no pyplot state, no global style) and writes
the PNG atomically. :class:`AttentionHeatmapCallback` does it for every example of the
validation data after each evaluation, into the run folder of a
:class:`scramjet.tracking.Experiment` (``results/attention_heatmaps/epoch_<n>/``), and
uploads the images through the storage layer that mirrors the run.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from scramjet.callbacks.base import TrainerCallback
from scramjet.compat.aitoolbox.cloud._transfer import mirror_files
from scramjet.runtime import distributed as dist
from scramjet.runtime.devices import move_to_device
from scramjet.runtime.files import atomic_write_bytes

if TYPE_CHECKING:
    from scramjet.tracking.experiment import Experiment
    from scramjet.trainer import Trainer

__all__ = ["AttentionHeatmapCallback", "heatmap_figure_size", "plot_attention_heatmap"]

#: ``attention_fn(model, batch) -> (attention [B, T_target, T_source], source tokens,
#: target tokens)``; the token lists hold one list of strings per example.
AttentionFn = Callable[
    [torch.nn.Module, Any], tuple[Any, Sequence[Sequence[str]], Sequence[Sequence[str]]]
]

DPI = 100


def heatmap_figure_size(n_source: int, n_target: int) -> tuple[float, float]:
    """Figure size in inches: half an inch per token plus room for the labels."""
    return max(3.0, 0.5 * n_source + 1.5), max(3.0, 0.5 * n_target + 1.5)


def plot_attention_heatmap(
    attention: Any, source_tokens: Sequence[str], target_tokens: Sequence[str], path: str
) -> str:
    """Write the heatmap of one ``[len(target), len(source)]`` attention matrix as a PNG.

    Raises:
        ValueError: the matrix shape does not match the token counts.
    """
    from matplotlib.figure import Figure

    matrix = torch.as_tensor(attention, dtype=torch.float32).detach().cpu()
    expected = (len(target_tokens), len(source_tokens))
    if tuple(matrix.shape) != expected:
        raise ValueError(
            f"attention has shape {tuple(matrix.shape)} but the tokens give {expected} "
            f"(target, source); crop the attention to the example's real lengths."
        )
    fig = Figure(figsize=heatmap_figure_size(*expected[::-1]), dpi=DPI)
    ax = fig.add_subplot(1, 1, 1)
    image = ax.imshow(matrix.numpy(), cmap="bone", vmin=0.0, aspect="auto")
    fig.colorbar(image, ax=ax)
    ax.set_xticks(range(len(source_tokens)), list(source_tokens), rotation=90)
    ax.set_yticks(range(len(target_tokens)), list(target_tokens))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_write_bytes(path, buffer.getvalue())
    return path


class AttentionHeatmapCallback(TrainerCallback):
    """After each evaluation, one attention heatmap PNG per validation example.

    Args:
        attention_fn: ``(model, batch) -> (attention [B, T_target, T_source], source
            tokens, target tokens)``; the batch is already on the model's device.
        experiment: write into ``<run folder>/results/<folder>/epoch_<n>/`` and upload the
            images to the run's storage. Give this or ``output_dir``. Epochs count from 1.
        output_dir: a local folder instead of a tracked run (nothing is uploaded).
        folder: the sub-folder of the run's ``results``.
        every_n_epochs: plot after every n-th epoch's evaluation.
        max_examples: plot at most this many examples (None: all).
    """

    def __init__(
        self,
        attention_fn: AttentionFn,
        experiment: Experiment | None = None,
        output_dir: str | os.PathLike[str] | None = None,
        folder: str = "attention_heatmaps",
        every_n_epochs: int = 1,
        max_examples: int | None = None,
    ) -> None:
        if (experiment is None) == (output_dir is None):
            raise ValueError(
                "AttentionHeatmapCallback needs exactly one destination: experiment= (a "
                "tracked run, uploaded with it) or output_dir= (a local folder)."
            )
        if every_n_epochs < 1:
            raise ValueError(f"every_n_epochs must be at least 1; received {every_n_epochs}.")
        self.attention_fn = attention_fn
        self.experiment = experiment
        self.output_dir = None if output_dir is None else os.fspath(output_dir)
        self.folder = folder
        self.every_n_epochs = every_n_epochs
        self.max_examples = max_examples
        self.last_paths: list[str] = []

    def _root(self) -> tuple[str, str]:
        """(folder the paths are relative to, folder the images go into)."""
        if self.experiment is not None:
            run = os.fspath(self.experiment.start())
            return run, os.path.join(run, "results", self.folder)
        local = os.fspath(self.output_dir or ".")
        return local, local

    def on_evaluation_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Plot every validation example (main process), then upload the images."""
        epoch = trainer.state.epoch + 1  # 1-based, as the folders are named
        loader = trainer.eval_dataloader
        if loader is None or not dist.is_main_process() or epoch % self.every_n_epochs:
            return
        base, target = self._root()
        self.last_paths = self._plot_all(trainer, loader, os.path.join(target, f"epoch_{epoch}"))
        experiment = self.experiment
        remote = None if experiment is None else experiment.remote_url
        if experiment is not None and remote is not None and self.last_paths:
            mirror_files(base, remote, self.last_paths, experiment.storage_options)

    def _plot_all(self, trainer: Trainer, loader: Any, folder: str) -> list[str]:
        model = trainer.unwrapped_model
        paths: list[str] = []
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                for batch in loader:
                    attention, sources, targets = self.attention_fn(
                        model, move_to_device(batch, trainer.device)
                    )
                    for i, (src, tgt) in enumerate(zip(sources, targets, strict=True)):
                        if self.max_examples is not None and len(paths) >= self.max_examples:
                            return paths
                        matrix = torch.as_tensor(attention[i])[: len(tgt), : len(src)]
                        name = os.path.join(folder, f"example_{len(paths)}.png")
                        paths.append(plot_attention_heatmap(matrix, src, tgt, name))
        finally:
            model.train(was_training)
        return paths
