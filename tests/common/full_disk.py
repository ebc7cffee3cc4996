"""A full disk, simulated: writes of chosen checkpoint files fail with ENOSPC."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import scramjet.checkpoint.payload as payload_module
import scramjet.checkpoint.records as records_module


class FullDisk:
    """Writes of files whose name ``match`` accepts fail with ENOSPC after ``budget`` bytes.

    The default matches checkpoint files (``ckpt-*``), not the index.
    """

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        budget: int = 0,
        match: Callable[[str], bool] = lambda name: name.startswith("ckpt-"),
    ) -> None:
        real = payload_module.atomic_write

        def failing(path: Path, write: Callable[[Any], object], *, fsync: bool = True) -> None:
            if not match(Path(path).name):
                return real(path, write, fsync=fsync)
            return real(path, lambda file: write(_Budget(file, budget)), fsync=fsync)

        self._monkeypatch = monkeypatch
        for module in (records_module, payload_module):  # index, checkpoint files
            monkeypatch.setattr(module, "atomic_write", failing)

    def undo(self) -> None:
        self._monkeypatch.undo()


class _Budget:
    def __init__(self, file: Any, budget: int) -> None:
        self._file, self._left = file, budget

    def write(self, data: Any) -> int:
        size = memoryview(data).nbytes
        if size > self._left:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._left -= size
        return int(self._file.write(data))

    def flush(self) -> None:
        self._file.flush()
