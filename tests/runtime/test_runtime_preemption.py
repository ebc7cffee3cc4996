"""PreemptionWatcher given signals it cannot handle: refused up front, nothing replaced."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from types import FrameType

import pytest

from scramjet.runtime.preemption import PreemptionWatcher


def _users_handler(signum: int, frame: FrameType | None) -> None:
    """A script's own SIGTERM handler."""


@pytest.fixture
def users_sigterm_handler() -> Iterator[None]:
    before = signal.signal(signal.SIGTERM, _users_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


@pytest.mark.parametrize("uncatchable", [signal.SIGKILL, signal.SIGSTOP])
def test_an_uncatchable_signal_is_refused_and_the_users_handler_stays(
    users_sigterm_handler: None, uncatchable: signal.Signals
) -> None:
    with pytest.raises(ValueError, match=uncatchable.name) as info:
        watcher = PreemptionWatcher([signal.SIGTERM, uncatchable])
        watcher.install()
    assert "cannot be caught" in str(info.value)
    assert signal.getsignal(signal.SIGTERM) is _users_handler


def test_a_number_that_is_no_signal_says_which_are() -> None:
    with pytest.raises(ValueError, match="999 is not a signal number") as info:
        PreemptionWatcher([999])
    assert "signal.SIGUSR1" in str(info.value)
