"""How a run failed, as its ``run.json`` keeps it: the traceback of the error that stopped
it, and the failure of a run that ``train()`` ended by raising its stop's error."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scramjet.runtime import distributed as dist
from scramjet.tracking import _files

if TYPE_CHECKING:
    from scramjet.trainer import Trainer

#: The most characters of a traceback kept (its end: the frame that raised).
TRACEBACK_LIMIT = 20_000

#: What ``run.json`` keeps of a failure, carried over by a session that only records it.
FAILURE_KEYS = ("error", "traceback")


def record_traceback(run_dir: Path, error: BaseException) -> None:
    """Add ``traceback`` (the error's formatted traceback, chained causes included) to
    ``run_dir/run.json``, keeping what the file already says."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    if len(text) > TRACEBACK_LIMIT:
        text = "...\n" + text[-TRACEBACK_LIMIT:]
    path = run_dir / "run.json"
    info = _files.read_json(path)
    info["traceback"] = text
    _files.write_json(path, info)


def error_text(error: BaseException) -> str:
    """``run.json``'s ``error``: the error's type and message (at most 500 characters)."""
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return text[:500]


def earlier_failure(info: dict[str, Any]) -> dict[str, Any] | None:
    """The failure a continued run's ``run.json`` recorded when its last session ended
    (``error`` and ``traceback``), or None when that session did not fail."""
    if info.get("status") != "failed":
        return None
    return {key: info[key] for key in FAILURE_KEYS if key in info}


def stop_failure(
    trainer: Trainer, start_step: int, earlier: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The failure to record for a run that reached its end events, or None: it succeeded.

    A stop whose error ``train()`` raises once the run has ended (``reraise``, as
    :class:`~scramjet.callbacks.TrainingNaNError` is) fails the run, with that error. A
    session that continued a failed run and stopped without training a step (it resumed
    a checkpoint that recorded the stop) keeps the ``earlier`` failure.

    Collective across processes: every rank learns whether any rank's run failed (a stop
    is raised again only on the rank that decided it), so they all skip the final
    checkpoint and weights alike.
    """
    stop, failure = trainer.stop_reason, None
    if stop is not None and stop.reraise:
        failure = {"error": error_text(stop)}
    elif stop is not None and earlier is not None and trainer.state.global_step == start_step:
        failure = dict(earlier)
    if dist.is_distributed():
        failed = bool(dist.reduce(int(failure is not None), op="max", check=False).item())
        if failed and failure is None:
            because = f" ({error_text(stop)})" if stop is not None else ""
            failure = {"error": f"another process ended the run with an error{because}"}
    return failure


__all__ = [
    "FAILURE_KEYS",
    "TRACEBACK_LIMIT",
    "earlier_failure",
    "error_text",
    "record_traceback",
    "stop_failure",
]
