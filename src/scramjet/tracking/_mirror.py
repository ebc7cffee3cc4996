"""The run's mirror on ``storage``: opening it (with the check at the start), uploads of
single files (batched every ``sync_every_s``) and the final sync. A base class of
:class:`~scramjet.tracking.experiment.Experiment`, which holds the settings it reads."""

from __future__ import annotations

import threading
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scramjet.tracking import _files
from scramjet.tracking.storage import RunStorage, StorageCheckError, StorageTimeouts, UploadReport
from scramjet.tracking.upload_process import ProcessRunStorage, open_storage

#: The run's JSON files whose last content written is kept in memory (small), to write them
#: back into a run folder removed while training.
KEPT_JSON = ("run.json", "hyperparams.json", "environment.json")


class RunMirror:
    """Uploads of a run folder's files to ``storage_url`` (nothing without one)."""

    storage_url: str | None
    storage_options: dict[str, Any]
    upload_process: bool | None
    upload_attempts: int
    upload_timeouts: StorageTimeouts
    on_storage_error: str
    sync_every_s: float
    _storage: RunStorage | ProcessRunStorage | None
    _deferred: set[str]
    _defer_lock: threading.Lock
    _last_sync: float
    _syncing: bool
    _kept_json: dict[str, str]

    if TYPE_CHECKING:

        @property
        def run_dir(self) -> Path: ...

        @property
        def remote_url(self) -> str | None: ...

        def _run_fields(self) -> dict[str, Any]: ...

    def _ensure_storage(self, check: bool = False) -> None:
        if self.storage_url is not None and self._storage is None:
            self._storage = open_storage(
                self.run_dir,
                str(self.remote_url),
                self.storage_options,
                process=self.upload_process,
                max_attempts=self.upload_attempts,
                timeouts=self.upload_timeouts,
                check=check,
            )

    def _open_storage_checked(self) -> str | None:
        """Open the storage after checking the remote; the check's error, if continuing locally."""
        try:
            self._ensure_storage(check=self.on_storage_error != "continue")
        except StorageCheckError as exc:
            if self.on_storage_error == "raise":
                _files.record_end(self.run_dir, "failed", exc, **self._run_fields())
                raise StorageCheckError(  # the same error, once, with the way out
                    f"{exc} To train with local files only, pass "
                    f"Experiment(..., on_storage_error='local')."
                ) from None
            warnings.warn(
                f"{exc} Training continues with local files only in {self.run_dir} "
                f"(on_storage_error='local').",
                RuntimeWarning,
                stacklevel=4,
            )
            self.storage_url = None
            return str(exc)
        return None

    def _write_json(self, rel: str, data: Any, periodic: bool = False) -> None:
        text = _files.write_json(self.run_dir / rel, data)
        if rel in KEPT_JSON:  # written back if the run folder is removed while training
            self._kept_json[rel] = text
        self._upload(rel, periodic=periodic)

    def _upload(self, rel: str, periodic: bool = False) -> None:
        if self._storage is None:
            return
        if not periodic or self.sync_every_s <= 0:
            self._storage.upload(rel)
            return
        with self._defer_lock:  # called from the loop and from the writer thread
            self._deferred.add(rel)
            now = time.monotonic()
            if now - self._last_sync < self.sync_every_s:
                return
            self._last_sync, pending, self._deferred = now, self._deferred, set()
        for name in sorted(pending):
            self._storage.upload(name)

    def _upload_metric_files(self) -> None:
        self._upload("metrics.csv", periodic=True)
        self._upload("metrics.jsonl", periodic=True)

    def _sync(self, finished: dict[str, Any] | None = None) -> UploadReport:
        assert self._storage is not None
        self._syncing = True  # cut short (Ctrl-C), close() says the run is not mirrored
        report = _files.sync_run(self._storage, self.run_dir, finished)
        self._syncing = False
        return report


__all__ = ["RunMirror"]
