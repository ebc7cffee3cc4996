"""``FORCE_COLOR`` (set by CI systems for coloured logs) asks for colours, not for a screen
that redraws in place: a Dashboard writing to a log that is not a terminal prints plain
lines, never one frame per refresh."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
import time

import pytest

from scramjet.dashboard import Dashboard


def _run(out: io.StringIO) -> Dashboard:
    board = Dashboard(file=out, print_every=0.05, refresh_per_second=20, show_memory=False)
    for mile in range(5):
        board.gauge({"loss": 1.0 / (mile + 1)}, mile, 0, 5, "train")
        time.sleep(0.06)
    board.close()
    return board


@pytest.mark.parametrize("value", ["1", "3", "true"])
def test_force_color_on_a_log_prints_plain_lines(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FORCE_COLOR", value)
    out = io.StringIO()
    _run(out)
    text = out.getvalue()
    assert "\x1b[" not in text, f"control codes written to a log: {text[:300]!r}"
    lines = [ln for ln in text.splitlines() if ln.startswith("train epoch 1")]
    assert lines and lines[-1].startswith("train epoch 1 5/5"), text


def test_force_color_with_tty_interactive_keeps_the_live_view(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("TTY_INTERACTIVE", "1")  # the user says: this device redraws
    out = io.StringIO()
    _run(out)
    assert "\x1b[" in out.getvalue()


def test_force_color_through_a_pipe_in_a_subprocess() -> None:
    code = textwrap.dedent(
        """
        import time
        from scramjet.dashboard import Dashboard
        board = Dashboard(print_every=0.05, refresh_per_second=20, show_memory=False)
        for mile in range(5):
            board.gauge({"loss": 1.0 / (mile + 1)}, mile, 0, 5, "train")
            time.sleep(0.06)
        board.close()
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TTY_")}
    env["FORCE_COLOR"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "\x1b[" not in done.stdout, done.stdout[:300]
    assert "train epoch 1 5/5" in done.stdout
