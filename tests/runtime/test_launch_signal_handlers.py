"""``launch()`` gives the caller its signal handlers back.

torch's elastic agent installs its own handler for SIGINT, SIGTERM, SIGHUP and SIGQUIT
while the processes run, and leaves it in place when it returns. After a ``launch()`` in
a script or notebook, Ctrl-C must raise ``KeyboardInterrupt`` again, and a handler the
caller had set for SIGTERM must still be the one called."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import dist_worker
import pytest

from scramjet.runtime import LaunchError, launch

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


@pytest.fixture
def own_handlers() -> Iterator[list[int]]:
    """A SIGTERM handler of the caller's, Python's own Ctrl-C handler, and SIGHUP ignored;
    every handler as it was afterwards."""
    before = {sig: signal.getsignal(sig) for sig in SIGNALS}
    received: list[int] = []

    def on_term(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    yield received
    for sig, handler in before.items():
        signal.signal(sig, handler)


def _check_handlers_are_back(received: list[int]) -> None:
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    os.kill(os.getpid(), signal.SIGTERM)  # reaches the caller's handler, not torch's
    deadline = time.monotonic() + 5
    while not received and time.monotonic() < deadline:
        time.sleep(0.01)
    assert received == [signal.SIGTERM]
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C in the caller, as before the launch
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)


def test_handlers_set_before_a_launch_are_in_place_after_it(
    tmp_path: Path, own_handlers: list[int]
) -> None:
    launch(dist_worker.main, nprocs=2, args=("ok", str(tmp_path)))
    _check_handlers_are_back(own_handlers)


def test_handlers_are_back_after_a_launch_that_failed(
    tmp_path: Path, own_handlers: list[int]
) -> None:
    with pytest.raises(LaunchError):
        launch(dist_worker.main, nprocs=2, args=("raise", str(tmp_path)))
    _check_handlers_are_back(own_handlers)
