"""AIToolbox's Weights & Biases callback: :class:`WandBTracking` and its :class:`AlertConfig`.

The run is a :class:`scramjet.tracking.loggers.wandb.WandbTracker` (the W&B logger of
scramjet's run folders), started with AIToolbox's settings: the experiment name as the run
name, the hyperparameters as the config, the tags, and any other ``wandb.init`` keyword
argument. Needs ``pip install 'scramjet[wandb]'``; ``mode='offline'`` (or
``WANDB_MODE=offline``) writes the run without a network, ``wandb sync`` uploads it later.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import AbstractExperimentCallback
from scramjet.tracking.loggers.wandb import WandbTracker

if TYPE_CHECKING:
    from wandb.sdk.wandb_alerts import AlertLevel

__all__ = ["AlertConfig", "WandBTracking"]

_OBJECTIVES = ("maximize", "minimize")


def _last(history: Any, name: str) -> float | None:
    """The last value of ``history[name]`` if it is a number (None when absent or empty)."""
    if name not in history or len(history[name]) == 0:
        return None
    value = history[name][-1]
    return float(value) if isinstance(value, int | float) else None


@dataclass
class AlertConfig:
    """A W&B alert sent when a metric crosses a threshold at the end of an epoch.

    Args:
        metric_name: a name in the TrainLoop's ``train_history`` (e.g. ``'val_loss'``).
        threshold_value: the bound of acceptable values.
        objective: ``'maximize'`` (the metric should grow: alert when it is below the
            threshold) or ``'minimize'`` (alert when it is above).
        wandb_alert_level: a ``wandb.AlertLevel``; None uses W&B's default (INFO).
    """

    metric_name: str
    threshold_value: float
    objective: str = "maximize"
    wandb_alert_level: AlertLevel | None = None

    def crossed(self, value: float) -> bool:
        """Whether ``value`` is on the wrong side of the threshold."""
        if self.objective == "maximize":
            return value < self.threshold_value
        return value > self.threshold_value


class _AitbRun(WandbTracker):
    """The W&B logger, started with AIToolbox's tags and extra ``wandb.init`` arguments,
    or attached to a run already started outside the callback."""

    def __init__(
        self,
        run_dir: str,
        project: str,
        run_name: str | None,
        tags: list[str] | None,
        init_kwargs: Mapping[str, Any],
        existing_run: Any = None,
    ) -> None:
        extra = dict(init_kwargs)
        # set before the logger's own set-up, which starts the run
        self.tags, self._existing_run = tags, existing_run
        run_id, entity, mode = (
            extra.pop("id", None),
            extra.pop("entity", None),
            extra.pop("mode", None),
        )
        self.extra = extra
        super().__init__(
            run_dir, project, run_name=run_name, run_id=run_id, entity=entity, mode=mode
        )

    @property
    def run(self) -> Any:
        """The W&B run (the one given, or started on first use)."""
        if self._run is None and self._existing_run is not None:
            self._run, self._existing_run = self._existing_run, None
        if self._run is None:
            import wandb

            os.makedirs(self.run_dir, exist_ok=True)
            self._run = wandb.init(
                project=self.project,
                entity=self.entity,
                name=self.run_name,
                id=self.run_id,
                dir=str(self.run_dir),
                mode=self.mode,  # type: ignore[arg-type]
                config=self._config or None,
                tags=self.tags,
                **{"reinit": "create_new", **self.extra},
            )
        return self._run


class WandBTracking(AbstractExperimentCallback):
    """Logs the TrainLoop's history to Weights & Biases and sends alerts on thresholds.

    At the end of every epoch (and every ``batch_log_frequency`` iterations, if set) the
    latest value of each tracked metric of ``train_history`` is logged at the loop's
    iteration count as W&B's step, with the epoch; then each alert is checked. At the end
    of training the source folders are saved with the run and the run is finished (a run
    started outside the callback is left open).

    Args:
        metric_names: the history metrics to log; None logs all of them.
        batch_log_frequency: also log every this many training iterations; None: only at
            epoch ends.
        hyperparams: the run's hyperparameters (W&B's config).
        tags: W&B tags of the run.
        alerts: a list of :class:`AlertConfig`.
        wandb_pre_initialized: True when ``wandb.init`` was already called (e.g. at the start
            of the script): the callback logs into ``wandb.run``.
        source_dirs: folders whose Python files are saved with the run as its code.
        log_dir: folder of W&B's files; default ``<experiment folder>/wandb`` with
            ``is_project``, the current folder's ``wandb`` otherwise.
        is_project: take the project details from the TrainLoop (see
            :class:`AbstractExperimentCallback`) and write under the experiment folder.
        project_name, experiment_name, local_model_result_folder_path, cloud_save_mode,
            bucket_name, cloud_dir_prefix: see :class:`AbstractExperimentCallback`; the
            project name is the W&B project, the experiment name the run's name.
        **kwargs: passed to ``wandb.init`` (``mode='offline'``, ``entity``, ``notes``, ...).

    Raises:
        TypeError: ``alerts`` is not a list of :class:`AlertConfig`.
        ValueError: an alert's objective is not ``'maximize'`` or ``'minimize'``.
    """

    def __init__(
        self,
        metric_names: list[str] | None = None,
        batch_log_frequency: int | None = None,
        hyperparams: dict[str, Any] | None = None,
        tags: list[str] | None = None,
        alerts: list[AlertConfig] | None = None,
        wandb_pre_initialized: bool = False,
        source_dirs: Iterable[str] = (),
        log_dir: str | None = None,
        is_project: bool = True,
        project_name: str | None = None,
        experiment_name: str | None = None,
        local_model_result_folder_path: str | None = None,
        cloud_save_mode: str | None = None,
        bucket_name: str | None = None,
        cloud_dir_prefix: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            "WandB Tracking",
            project_name,
            experiment_name,
            local_model_result_folder_path,
            cloud_save_mode,
            bucket_name,
            cloud_dir_prefix,
            execution_order=97,
            device_idx_execution=0,
        )
        self.metric_names = metric_names
        self.batch_log_frequency = batch_log_frequency
        self.hyperparams = hyperparams
        self.tags = tags
        self.alerts = alerts
        self.wandb_pre_initialized = wandb_pre_initialized
        self.source_dirs = list(source_dirs)
        self.log_dir = log_dir
        self.is_project = is_project
        self.wandb_init_kwargs = kwargs
        self.tracker: _AitbRun | None = None
        #: The alerts sent: ``(metric name, epoch, value)``.
        self.sent_alerts: list[tuple[str, int, float]] = []
        self.check_alerts()

    def check_alerts(self) -> None:
        """Check that ``alerts`` is None or a list of :class:`AlertConfig` with valid objectives."""
        if self.alerts is None:
            return
        if not isinstance(self.alerts, list) or not all(
            isinstance(a, AlertConfig) for a in self.alerts
        ):
            raise TypeError(
                f"WandBTracking: alerts must be a list of AlertConfig; received "
                f"{self.alerts!r}. Write e.g. alerts=[AlertConfig('val_loss', 0.5, 'minimize')]."
            )
        for alert in self.alerts:
            if alert.objective not in _OBJECTIVES:
                raise ValueError(
                    f"WandBTracking: the alert on {alert.metric_name!r} has objective "
                    f"{alert.objective!r}; expected 'maximize' or 'minimize'."
                )

    def on_train_loop_registration(self) -> None:
        """Find the log folder and prepare the W&B run (started with the first values)."""
        try:
            import wandb
        except ImportError as exc:
            raise ImportError(
                "WandBTracking needs Weights & Biases: pip install 'scramjet[wandb]'"
            ) from exc
        if self.is_project:
            self.try_infer_experiment_details(infer_cloud_details=True)
        existing = None
        if self.wandb_pre_initialized:
            existing = wandb.run
            if existing is None:
                raise ValueError(
                    "WandBTracking: wandb_pre_initialized=True but no W&B run is active. "
                    "Call wandb.init(...) before training, or leave wandb_pre_initialized=False."
                )
        self.tracker = _AitbRun(
            self.wandb_log_dir(),
            str(self.project_name or "aitoolbox"),
            self.experiment_name,
            self.tags,
            self.wandb_init_kwargs,
            existing,
        )
        if self.hyperparams:
            self.tracker.log_hyperparams(self.hyperparams)

    def wandb_log_dir(self) -> str:
        """Where W&B writes its files (its ``wandb`` folder goes inside)."""
        if self.log_dir is not None:
            return os.path.expanduser(self.log_dir)
        if not self.is_project:
            return os.getcwd()
        loop = self.train_loop_obj
        return os.path.join(
            str(self.local_model_result_folder_path),
            str(self.project_name),
            f"{self.experiment_name}_{loop.experiment_timestamp}",
        )

    def latest_metrics(self) -> dict[str, float]:
        """The last value of each tracked history metric (metrics without values skipped)."""
        history = self.train_loop_obj.train_history
        names = list(history.keys()) if self.metric_names is None else self.metric_names
        out: dict[str, float] = {}
        for name in names:
            value = _last(history, name)
            if value is not None:
                out[name] = value
        return out

    def log_metrics(self, scope: str) -> None:
        """Log :meth:`latest_metrics` at the loop's iteration count."""
        import time

        metrics = self.latest_metrics()
        if self.tracker is None or not metrics:
            return
        loop = self.train_loop_obj
        step = max(int(loop.total_iteration_idx), 0)
        row = {"scope": scope, "step": step, "epoch": loop.epoch, "time": time.time()}
        self.tracker.log_metrics([{**row, "metrics": metrics}])  # type: ignore[typeddict-item]

    def check_metric_alerts(self) -> None:
        """Send a W&B alert for each alert whose metric crossed its threshold."""
        if not self.alerts or self.tracker is None:
            return
        history = self.train_loop_obj.train_history
        for alert in self.alerts:
            value = _last(history, alert.metric_name)
            if value is None or not alert.crossed(value):
                continue
            epoch = int(self.train_loop_obj.epoch)
            side = "below" if alert.objective == "maximize" else "above"
            extra = {} if alert.wandb_alert_level is None else {"level": alert.wandb_alert_level}
            self.tracker.run.alert(
                title=f"{alert.metric_name} {side} {alert.threshold_value}",
                text=f"Epoch {epoch}: {alert.metric_name} = {value} is {side} the "
                f"threshold {alert.threshold_value} (objective: {alert.objective}).",
                **extra,
            )
            self.sent_alerts.append((alert.metric_name, epoch, value))

    def on_batch_end(self) -> None:
        """Log every ``batch_log_frequency`` iterations."""
        freq = self.batch_log_frequency
        if freq and self.train_loop_obj.total_iteration_idx % freq == 0:
            self.log_metrics("step")

    def on_epoch_end(self) -> None:
        """Log the epoch's values and check the alerts."""
        self.log_metrics("epoch")
        self.check_metric_alerts()

    def on_train_end(self) -> None:
        """Save the source folders' code with the run; finish a run the callback started."""
        if self.tracker is None:
            return
        for folder in self.source_dirs:
            self.tracker.run.log_code(root=os.path.expanduser(folder))
        if not self.wandb_pre_initialized:
            self.tracker.close()
