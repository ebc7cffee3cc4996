"""rich's ``TTY_INTERACTIVE=0`` (colours, no animation: CI logs) gets progress lines."""

from __future__ import annotations

import io
import time

import pytest

from scramjet.dashboard import Dashboard


def test_progress_is_printed_during_the_run_when_the_terminal_is_not_interactive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # a log viewer that shows colours
    monkeypatch.setenv("TTY_INTERACTIVE", "0")  # but cannot redraw in place
    out = io.StringIO()
    board = Dashboard(file=out, print_every=0.05, show_memory=False)
    try:
        for mile in range(6):
            board.gauge({"loss": 1.0 / (mile + 1)}, mile, 0, 100, "train")
            time.sleep(0.1)
        seen_during_run = out.getvalue()
    finally:
        board.close()
    assert "train epoch 1" in seen_during_run, f"nothing shown while training: {out.getvalue()!r}"
