"""set_visible_gpus given what users pass by mistake: the variable is left alone."""

from __future__ import annotations

import os

import pytest

from scramjet.runtime.devices import set_visible_gpus


@pytest.mark.parametrize(
    ("indices", "error", "says"),
    [
        ("12", TypeError, "received str '12'"),  # read as GPUs 1 and 2 before
        ("0,1", TypeError, "received str '0,1'"),
        (3, TypeError, "received int 3"),
        ([0, -1], ValueError, "-1"),
        ([0, 1.5], TypeError, "1.5"),
        ([True], TypeError, "True"),
    ],
)
def test_bad_indices_are_refused_and_leave_the_variable_alone(
    monkeypatch: pytest.MonkeyPatch, indices: object, error: type[Exception], says: str
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    with pytest.raises(error, match="set_visible_gpus") as info:
        set_visible_gpus(indices)  # type: ignore[arg-type]
    assert says in str(info.value)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "7"


def test_good_indices_are_written_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    assert set_visible_gpus((2, 0)) == "2,0"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2,0"
