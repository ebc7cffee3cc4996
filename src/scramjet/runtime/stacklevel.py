"""Warnings that point at the user's line, not at scramjet's or torch's internals."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import torch

_LIBRARY_DIRS = (
    str(Path(__file__).resolve().parents[1]) + os.sep,
    str(Path(torch.__file__).resolve().parent) + os.sep,
    # a ``with`` block of ours (a @contextmanager) warns from inside contextlib's __exit__
    str(Path(contextlib.__file__).resolve()),
)


def user_stacklevel() -> int:
    """The ``stacklevel`` for ``warnings.warn`` that points at the user's line: the first
    caller outside scramjet, torch and ``contextlib``, counted from the function that warns. Users can
    then filter the warning by their own module, and see which call of theirs it was."""
    frame = sys._getframe(1)  # the function that warns: stacklevel 1
    level = 1
    while frame.f_back is not None and os.path.realpath(frame.f_code.co_filename).startswith(
        _LIBRARY_DIRS
    ):
        frame, level = frame.f_back, level + 1
    return level
