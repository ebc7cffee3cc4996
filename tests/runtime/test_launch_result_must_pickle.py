"""launch() whose function returns a value that cannot travel back to the caller."""

from __future__ import annotations

import threading

import pytest

from scramjet.runtime import LaunchError, launch

pytestmark = pytest.mark.distributed


def returns_a_lock() -> threading.Lock:
    """A worker whose result cannot be pickled (the children send results by pickle)."""
    return threading.Lock()


def test_an_unpicklable_result_is_named_with_the_fix() -> None:
    with pytest.raises(LaunchError) as caught:
        launch(returns_a_lock, nprocs=2, start_method="fork")
    message = caught.value.message
    # It was "exited with status 1", the pickling error only in the children's log.
    assert "returns_a_lock returned" in message, message
    assert "lock" in message and "pickle" in message, message
