"""MLflow runs (``pip install 'scramjet[mlflow]'``; mlflow-skinny is enough)."""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from scramjet.tracking.loggers.base import MetricRow, Tracker

#: Seconds to wait for an MLflow server to accept a connection when the run starts.
CONNECT_TIMEOUT_S = 5.0


def _check_server(uri: str) -> None:
    """Fail at once when an ``http(s)://`` tracking server does not accept connections.

    MLflow's client retries an unreachable server with growing waits for minutes before it
    reports anything, so a wrong ``MLFLOW_TRACKING_URI`` would hold ``train()`` silently at
    its start. One TCP connection, bounded by :data:`CONNECT_TIMEOUT_S`, tells first.
    """
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise ConnectionError(
            f"The MLflow tracking server {uri} does not accept connections on "
            f"{parts.hostname}:{port} ({type(exc).__name__}: {exc}). Start it (mlflow server "
            f"--port {port}), correct MLFLOW_TRACKING_URI (or tracking_uri), or remove "
            f"'mlflow' from the Experiment's loggers."
        ) from exc


#: Characters MLflow refuses in a param or metric name (it allows letters, digits, ``_``,
#: ``-``, ``.``, space, ``:`` and ``/``).
_REFUSED = re.compile(r"[^/\w.\- :]")


#: The longest param or metric name MLflow accepts (a longer one fails its whole batch).
MAX_NAME_LENGTH = 250


def mlflow_name(name: str) -> str:
    """``name`` as MLflow accepts it: each refused character replaced by ``_``, a name
    that would read as another path (``a//b``, ``/a``, ``a/``) with its slashes replaced,
    and a name longer than :data:`MAX_NAME_LENGTH` cut, ending with a hash of the whole
    name so that two long names stay two."""
    out = _REFUSED.sub("_", name)
    if _reads_as_path(out):
        out = out.replace("/", "_")
    out = f"_{out}" if _reads_as_path(out) else out
    if len(out) > MAX_NAME_LENGTH:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        out = f"{out[: MAX_NAME_LENGTH - 11].rstrip('/')}-{digest}"
    return out


def _renamed_because(name: str, owner: str) -> str:
    """Why MLflow gets another name than ``name`` (``owner`` holds the name it would get)."""
    if len(name) > MAX_NAME_LENGTH:
        return f"MLflow refuses names longer than {MAX_NAME_LENGTH} characters ({len(name)})"
    if owner != name:
        return f"MLflow already records {owner!r} under the name this one would get"
    return "MLflow refuses the name (it allows letters, digits, '_', '-', '.', ' ', ':' and '/')"


def _reads_as_path(name: str) -> bool:
    """MLflow's check: a name must be its own normal path, and not ``.``, ``..`` or ``/``."""
    norm = posixpath.normpath(name)
    return norm != name or norm == "." or norm.startswith(("..", "/"))


def _is_file_store(uri: str) -> bool:
    """Whether ``uri`` names MLflow's file store: a local path or a ``file:`` URI."""
    scheme = urlsplit(uri).scheme
    drive = len(scheme) == 1 and os.name == "nt"  # a Windows path such as C:/mlruns
    return scheme in ("", "file") or drive


_MLFLOW_STATUS = {"finished": "FINISHED", "upload-failed": "FINISHED", "interrupted": "KILLED"}


class MLflowTracker(Tracker):
    """Logs to an MLflow tracking server or store, one MLflow run per scramjet run.

    Every run of every project goes to one store, so ``mlflow ui`` compares them: the
    MLflow experiment is the scramjet project, the MLflow run is named after the run
    folder and tagged with its source (``mlflow.source.name``, ``mlflow.source.git.commit``,
    ``mlflow.user``). Metrics use the optimizer step (epoch rows add ``epoch``); a name with
    characters MLflow refuses (``acc@1``) is recorded with ``_`` in their place (one warning
    per name) instead of losing the batch it came in; params
    are the meaningful settings (see :meth:`Tracker.log_hyperparams`); the report, the
    results and the final model are stored as artifacts; the run ends ``FINISHED``,
    ``FAILED`` or ``KILLED`` (interrupted).

    Args:
        run_dir: the run folder.
        experiment_name: MLflow experiment (created if missing).
        run_name: MLflow run name (default: the run folder's name).
        tracking_uri: e.g. ``http://mlflow:5000``, ``sqlite:///mlflow.db`` (the full
            ``mlflow`` package); default ``$MLFLOW_TRACKING_URI``, else the file store
            ``./mlruns`` of the working directory (mlflow-skinny writes it without a
            database). Recent MLflow versions open a file store only with
            ``MLFLOW_ALLOW_FILE_STORE=true``: this logger sets it in the training process
            for a file store (``./mlruns``, a local path or a ``file:`` URI);
            set it too when reading the store from another process (``MlflowClient``,
            ``mlflow ui --backend-store-uri ./mlruns``). An ``http(s)://`` server that
            does not accept a connection within 5 s is an error at the run's start.
        run_id: continue this MLflow run (used on resume).
        tags: tags of a new MLflow run.
    """

    name = "mlflow"

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        experiment_name: str = "scramjet",
        run_name: str | None = None,
        tracking_uri: str | None = None,
        run_id: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        try:
            from mlflow.tracking import MlflowClient
        except ImportError as exc:
            raise ImportError(
                "loggers=('mlflow',) needs MLflow: pip install 'scramjet[mlflow]'"
            ) from exc
        uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            uri = Path("mlruns").resolve().as_uri()
        if _is_file_store(uri):
            # mlflow-skinny has no SQL backend; its file store needs an explicit opt-in.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.tracking_uri = uri
        _check_server(uri)
        try:
            self.client = MlflowClient(tracking_uri=uri)
        except Exception as exc:  # MlflowException: a store this installation cannot open
            raise ValueError(
                f"MLflow cannot open the tracking store {uri!r} ({type(exc).__name__}: "
                f"{str(exc).strip()[:300]}). A database URI (sqlite://, postgresql://) needs "
                f"the full package (pip install mlflow; mlflow-skinny has no database "
                f"backend); otherwise set MLFLOW_TRACKING_URI to a server (http://host:5000) "
                f"or unset it to use ./mlruns."
            ) from exc
        if run_id is None:
            exp_id = self._experiment_id(experiment_name)
            name = run_name or Path(run_dir).name
            run_id = self.client.create_run(
                exp_id, run_name=name, tags=dict(tags or {})
            ).info.run_id
        self.run_id: str = run_id
        self._status = "FINISHED"
        self._names: dict[str, str] = {}
        self._owners: dict[str, str] = {}  # MLflow name -> the name it records

    def _name(self, name: str) -> str:
        """The name MLflow records ``name`` under; a changed one is said once per run. Two
        names that MLflow's rules make one (``acc@1`` and ``acc_1``) stay two: the later
        one ends with a hash of its own name."""
        found = self._names.get(name)
        if found is None:
            found = mlflow_name(name)
            owner = self._owners.setdefault(found, name)
            if owner != name:
                digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
                found = f"{found[: MAX_NAME_LENGTH - 11].rstrip('/')}-{digest}"
                self._owners[found] = name
            self._names[name] = found
            if found != name:
                warnings.warn(
                    f"{_renamed_because(name, owner)}: {name!r}; MLflow records it as "
                    f"{found!r}, the other loggers as {name!r}. Rename it to keep one name "
                    f"everywhere.",
                    UserWarning,
                    stacklevel=2,
                )
        return found

    def _experiment_id(self, name: str) -> str:
        """The id of the MLflow experiment ``name``, created if missing. Runs of a new
        project started at the same time (a sweep) race to create it: the losers use the
        winner's."""
        found = self.client.get_experiment_by_name(name)
        if found is not None and found.lifecycle_stage == "deleted":
            raise ValueError(
                f"The MLflow experiment {name!r} (id {found.experiment_id}) of this project was "
                f"deleted, and MLflow refuses new runs in it. Restore it (`mlflow experiments "
                f"restore --experiment-id {found.experiment_id}`), remove it for good (`mlflow "
                f"gc`), or use another project name."
            )
        if found is not None:
            return str(found.experiment_id)
        try:
            return str(self.client.create_experiment(name))
        except Exception:  # MlflowException RESOURCE_ALREADY_EXISTS, from any store
            found = self.client.get_experiment_by_name(name)
            if found is None:
                raise
            return str(found.experiment_id)

    def log_hyperparams(self, params: Mapping[str, Any]) -> None:
        """Log the params not logged yet. MLflow params cannot change: a resumed run whose
        setting changed (more epochs, say) keeps the first value as the param, gets the
        new one as the tag ``resumed.<name>``, and says so in one warning."""
        from mlflow.entities import Param, RunTag

        existing = dict(self.client.get_run(self.run_id).data.params)
        items, changed, seen = [], [], set()
        for key, value in params.items():
            name, text = self._name(key), str(value)[:6000]
            if name in seen:  # two names that become one: the first is kept
                continue
            seen.add(name)
            if name not in existing:
                items.append(Param(name, text))
            elif existing[name] != text:
                changed.append((name, existing[name], text))
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i : i + 100])
        if changed:
            tags = [RunTag(f"resumed.{name}", new) for name, _, new in changed]
            self.client.log_batch(self.run_id, tags=tags)
            said = ", ".join(f"{name} {old} -> {new}" for name, old, new in changed)
            warnings.warn(
                f"MLflow params cannot change, and this resumed run changed {said}: MLflow "
                f"keeps the first values as params and records the new ones as the tags "
                f"'resumed.<name>'; hyperparams.json and the report hold the values in use.",
                UserWarning,
                stacklevel=2,
            )

    def log_metrics(self, rows: Sequence[MetricRow]) -> None:
        """Log every value at the row's step and wall time (epoch rows add ``epoch``)."""
        from mlflow.entities import Metric

        metrics = []
        for row in rows:
            stamp, step = int(row["time"] * 1000), row["step"]
            for name, value in row["metrics"].items():
                metrics.append(Metric(self._name(name), float(value), stamp, step))
            if row["scope"] == "epoch" and "epoch" not in row["metrics"]:  # the user's kept
                metrics.append(Metric(self._name("epoch"), float(row["epoch"]), stamp, step))
        for i in range(0, len(metrics), 900):
            self.client.log_batch(self.run_id, metrics=metrics[i : i + 900])

    def log_results(self, name: str, results: Mapping[str, float], step: int) -> None:
        """Log each number as the metric ``<name>/<metric>``."""
        import time

        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        metrics = [
            Metric(self._name(f"{name}/{k}"), float(v), stamp, step) for k, v in results.items()
        ]
        if metrics:
            self.client.log_batch(self.run_id, metrics=metrics)

    def log_artifacts(self, run_dir: Path, files: Sequence[str]) -> None:
        """Copy the files into the run's artifacts, keeping their folders."""
        for rel in files:
            folder = Path(rel).parent.as_posix()
            self.client.log_artifact(
                self.run_id, str(run_dir / rel), None if folder == "." else folder
            )

    def set_status(self, status: str) -> None:
        """The MLflow status the run ends with."""
        self._status = _MLFLOW_STATUS.get(status, "FAILED")

    def close(self) -> None:
        """End the MLflow run with its status."""
        self.client.set_terminated(self.run_id, status=self._status)
