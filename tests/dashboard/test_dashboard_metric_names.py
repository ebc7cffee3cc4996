"""A metric name is shown next to its value in a row and in each plain line: a blank one,
or one with a newline or escape code (which breaks the line of a CI log), is refused."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from scramjet.compat.nebulae import DashBoard
from scramjet.dashboard import Dashboard


@pytest.mark.parametrize("name", ["", "  ", "loss\nval", "acc\x1b[2J", "\t"])
@pytest.mark.parametrize("cls", [Dashboard, DashBoard])
def test_blank_or_control_metric_name_is_refused(
    cls: type[Dashboard], name: str, tmp_path: Path
) -> None:
    out = io.StringIO()
    board = cls(log_path=str(tmp_path), file=out, force_terminal=False, show_memory=False)
    with pytest.raises(ValueError, match="metric name") as err:
        board.gauge({"loss": 0.5, name: 1.0}, 0, 0, 1, "train")
    assert repr(name) in str(err.value), err.value
    board.close()
    assert out.getvalue() == "" and board.snapshot().stages == []


def test_metric_names_in_any_script_are_shown(tmp_path: Path) -> None:
    out = io.StringIO()
    board = Dashboard(log_path=str(tmp_path), file=out, force_terminal=False)
    board.gauge({"損失": 0.5, 3: 1.0}, 0, 0, 1, "train")
    board.close()
    assert "損失 0.5 · 3 1" in out.getvalue()
