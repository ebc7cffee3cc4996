"""MLflow runs (``pip install 'scramjet[mlflow]'``; mlflow-skinny is enough)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scramjet.tracking.loggers.base import MetricRow, Tracker, flatten_params


class MLflowTracker(Tracker):
    """Logs to an MLflow tracking server or store, one MLflow run per scramjet run.

    Args:
        run_dir: the run folder (the default store is the file store
            ``<run_dir>/mlruns``, which mlflow-skinny can write without a database).
        experiment_name: MLflow experiment (created if missing).
        run_name: MLflow run name.
        tracking_uri: e.g. ``http://mlflow:5000``, ``sqlite:///mlflow.db``; default
            ``$MLFLOW_TRACKING_URI``, else a file store inside the run folder.
        run_id: continue this MLflow run (used on resume).
    """

    name = "mlflow"

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        experiment_name: str = "scramjet",
        run_name: str | None = None,
        tracking_uri: str | None = None,
        run_id: str | None = None,
    ) -> None:
        try:
            from mlflow.tracking import MlflowClient
        except ImportError as exc:
            raise ImportError(
                "loggers=('mlflow',) needs MLflow: pip install 'scramjet[mlflow]'"
            ) from exc
        uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            # mlflow-skinny has no SQL backend; its file store needs an explicit opt-in.
            uri = (Path(run_dir).resolve() / "mlruns").as_uri()
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.tracking_uri = uri
        self.client = MlflowClient(tracking_uri=uri)
        if run_id is None:
            found = self.client.get_experiment_by_name(experiment_name)
            exp_id = (
                found.experiment_id if found else self.client.create_experiment(experiment_name)
            )
            run_id = self.client.create_run(exp_id, run_name=run_name).info.run_id
        self.run_id: str = run_id

    def log_hyperparams(self, params: Mapping[str, Any]) -> None:
        """Log flattened hyperparameters as MLflow params (values as strings)."""
        from mlflow.entities import Param

        flat = flatten_params(params)
        existing = self.client.get_run(self.run_id).data.params
        items = [Param(k, str(v)[:6000]) for k, v in flat.items() if k not in existing]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i : i + 100])

    def log_metrics(self, rows: Sequence[MetricRow]) -> None:
        """Log every value in batches; x is the step (step scope) or epoch (epoch scope)."""
        from mlflow.entities import Metric

        metrics = []
        for row in rows:
            x = row["step"] if row["scope"] == "step" else row["epoch"]
            prefix = "" if row["scope"] == "epoch" else "step_"
            for name, value in row["metrics"].items():
                metrics.append(Metric(prefix + name, float(value), int(row["time"] * 1000), x))
        for i in range(0, len(metrics), 900):
            self.client.log_batch(self.run_id, metrics=metrics[i : i + 900])

    def close(self) -> None:
        """Mark the MLflow run finished."""
        self.client.set_terminated(self.run_id)
