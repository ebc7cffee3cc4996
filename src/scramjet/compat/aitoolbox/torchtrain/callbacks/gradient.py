"""AIToolbox's gradient callbacks: clipping, gradient statistics and their distribution plots.

They act in ``on_after_gradient_update``: after backward (and after fp16 gradients are
unscaled), before the optimizer step, once per update. Registering one sets the loop's
``grad_cb_used`` so the loop calls that hook.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import (
    AbstractCallback,
    AbstractExperimentCallback,
)

__all__ = [
    "GradDistributionPlot",
    "GradNormClip",
    "GradValueClip",
    "GradientCallbackBase",
    "GradientStatsPrint",
]


class GradientCallbackBase(AbstractCallback):
    """Base of the gradient callbacks: registering one switches on the loop's gradient hooks."""

    def __init__(self, callback_name: str, execution_order: int = 0) -> None:
        super().__init__(callback_name, execution_order)

    def on_train_loop_registration(self) -> None:
        """Ask the loop to call ``on_after_gradient_update``."""
        self.train_loop_obj.grad_cb_used = True


class GradValueClip(GradientCallbackBase):
    """Clips every gradient element to ``[-max_grad_value, max_grad_value]`` before each update."""

    def __init__(self, max_grad_value: float) -> None:
        super().__init__("Gradient value clipping")
        self.max_grad_value = max_grad_value

    def on_after_gradient_update(self, optimizer_idx: int = 0) -> None:
        """Clip."""
        torch.nn.utils.clip_grad_value_(self.train_loop_obj.model.parameters(), self.max_grad_value)


class GradNormClip(GradientCallbackBase):
    """Rescales the gradients so their total norm is at most ``max_grad_norm`` before each update.

    ``kwargs`` go to :func:`torch.nn.utils.clip_grad_norm_` (e.g. ``norm_type``);
    :attr:`last_total_norm` is the norm before the latest clipping.
    """

    def __init__(self, max_grad_norm: float, **kwargs: Any) -> None:
        super().__init__("Gradient norm clipping")
        self.max_grad_norm, self.kwargs = max_grad_norm, kwargs
        self._last_norm: torch.Tensor | None = None  # read as a float only when asked for

    def on_after_gradient_update(self, optimizer_idx: int = 0) -> None:
        """Clip and remember the norm before clipping."""
        norm = torch.nn.utils.clip_grad_norm_(
            self.train_loop_obj.model.parameters(), self.max_grad_norm, **self.kwargs
        )
        self._last_norm = norm.detach()

    @property
    def last_total_norm(self) -> float | None:
        """The total gradient norm before the latest clipping (None before the first)."""
        return None if self._last_norm is None else float(self._last_norm)


def _layer_weight_grads(
    model: torch.nn.Module, extract: Callable[[Any], Any] | None
) -> list[tuple[str, torch.Tensor | None]]:
    """(name, gradient) of each layer's ``weight`` (or of every parameter without ``extract``)."""
    if extract is None:
        return [(name, p.grad) for name, p in model.named_parameters()]
    return [
        (f"Layer {i}", getattr(getattr(layer, "weight", None), "grad", None))
        for i, layer in enumerate(extract(model))
    ]


class GradientStatsPrint(GradientCallbackBase):
    """Prints the mean, standard deviation and share of zeros of each layer's weight gradient.

    Args:
        model_layers_extract_def: function ``model -> list of layers`` whose ``weight``
            gradients are reported; None reports every named parameter of the model.
        on_every_grad_update: print at every sampled update instead of at the epoch's end
            (the report then shows the epoch's last sampled update).
        stats_eval_freq: sample the gradients every this many updates (the first update
            of training is always sampled).

    :attr:`last_stats` maps each reported name to its ``mean``, ``std``, ``norm`` and
    ``zero_ratio``.
    """

    def __init__(
        self,
        model_layers_extract_def: Callable[[Any], Any] | None = None,
        on_every_grad_update: bool = False,
        stats_eval_freq: int = 1,
    ) -> None:
        super().__init__("Print model gradient stats")
        if isinstance(stats_eval_freq, bool) or not isinstance(stats_eval_freq, int):
            raise TypeError(f"stats_eval_freq must be an int ≥ 1; received {stats_eval_freq!r}.")
        if stats_eval_freq < 1:
            raise ValueError(f"stats_eval_freq must be ≥ 1; received {stats_eval_freq}.")
        self.model_layers_extract_def = model_layers_extract_def
        self.on_every_grad_update = on_every_grad_update
        self.stats_eval_freq = stats_eval_freq
        self.last_stats: dict[str, dict[str, float]] = {}
        self._updates = 0

    def on_after_gradient_update(self, optimizer_idx: int = 0) -> None:
        """Sample the statistics on every ``stats_eval_freq``-th update."""
        sampled = self._updates % self.stats_eval_freq == 0
        self._updates += 1
        if not sampled:
            return
        stats: dict[str, dict[str, float]] = {}
        for name, grad in _layer_weight_grads(
            self.train_loop_obj.model, self.model_layers_extract_def
        ):
            if grad is None:
                continue
            g = grad.detach().float().cpu().numpy()
            stats[name] = {
                "mean": np.mean(g),
                "std": np.std(g),
                "norm": float(np.linalg.norm(g)),
                "zero_ratio": float(np.count_nonzero(g == 0)) / g.size,
            }
        self.last_stats = stats
        if self.on_every_grad_update:
            self.gradients_report()

    def on_epoch_end(self) -> None:
        """Print the epoch's last sampled statistics."""
        if not self.on_every_grad_update:
            self.gradients_report()

    def gradients_report(self) -> None:
        """Print :attr:`last_stats`."""
        print("---> Model layers gradients stats")
        for name, s in self.last_stats.items():
            if self.model_layers_extract_def is None:
                print(
                    f"\tgrad {name}: mean {s['mean']:.4g} std {s['std']:.4g} norm {s['norm']:.4g}"
                )
            else:
                print(f"\t{name} grads: Mean: {s['mean']}; Std {s['std']}")
                print(f"\t\tRatio of zero gradients: {s['zero_ratio']}")


class GradDistributionPlot(AbstractExperimentCallback):
    """At each epoch's end, plots a histogram of each layer's weight gradients.

    Files: ``<experiment>/results/grad_distribution/epoch_<n>/layer_<i>.png`` in the
    experiment folder (project details taken from a tracked TrainLoop when not given).

    Args:
        model_layers_extract_def: function ``model -> list of layers``.
        project_name, experiment_name, local_model_result_folder_path: see
            :class:`AbstractExperimentCallback`.
    """

    def __init__(
        self,
        model_layers_extract_def: Callable[[Any], Any],
        project_name: str | None = None,
        experiment_name: str | None = None,
        local_model_result_folder_path: str | None = None,
        cloud_save_mode: str | None = None,
        bucket_name: str | None = None,
        cloud_dir_prefix: str | None = None,
    ) -> None:
        super().__init__(
            "Gradient distribution plotter",
            project_name,
            experiment_name,
            local_model_result_folder_path,
            cloud_save_mode,
            bucket_name,
            cloud_dir_prefix,
        )
        self.model_layers_extract_def = model_layers_extract_def
        self.written: list[Path] = []

    def on_train_loop_registration(self) -> None:
        """Take missing project details from the loop."""
        self.try_infer_experiment_details(infer_cloud_details=False)

    def plot_dir(self) -> Path:
        """This epoch's plot folder (created)."""
        loop = self.train_loop_obj
        experiment = f"{self.experiment_name}_{loop.experiment_timestamp}"
        root = Path(os.fspath(self.local_model_result_folder_path or "."))
        path = root / str(self.project_name) / experiment / "results" / "grad_distribution"
        path = path / f"epoch_{loop.epoch}"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def on_epoch_end(self) -> None:
        """Plot each layer's gradient histogram."""
        from matplotlib.figure import Figure

        from scramjet.runtime.files import atomic_write_bytes

        folder = self.plot_dir()
        model = self.train_loop_obj.model
        for name, grad in _layer_weight_grads(model, self.model_layers_extract_def):
            if grad is None:
                print(f"{name}: no gradients")
                continue
            fig = Figure(figsize=(8, 6))
            ax = fig.add_subplot()
            ax.hist(grad.detach().float().reshape(-1).cpu().numpy(), bins=50)
            ax.set_xlabel("gradient value")
            ax.set_title(f"Gradient distribution of {name.lower()}")
            path = folder / f"{name.lower().replace(' ', '_')}.png"
            buf = _png(fig)
            atomic_write_bytes(path, buf, fsync=False)
            self.written.append(path)


def _png(fig: Any) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
