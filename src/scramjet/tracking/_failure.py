"""The traceback of the error that stopped a run, kept in its ``run.json``."""

from __future__ import annotations

import traceback
from pathlib import Path

from scramjet.tracking import _files

#: The most characters of a traceback kept (its end: the frame that raised).
TRACEBACK_LIMIT = 20_000


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


__all__ = ["TRACEBACK_LIMIT", "record_traceback"]
