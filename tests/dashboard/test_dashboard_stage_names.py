"""A stage name is what a row, a plain line and the CSV's ``stage`` column show: a blank
one (empty, spaces, control characters) or one that is not text is refused."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from scramjet.compat.nebulae import DashBoard
from scramjet.dashboard import Dashboard


@pytest.mark.parametrize("stage", ["", "   ", "\t\n", "\x1b", "train\nloss", "\x00"])
@pytest.mark.parametrize("cls", [Dashboard, DashBoard])
def test_blank_or_control_stage_is_refused_and_nothing_recorded(
    cls: type[Dashboard], stage: str, tmp_path: Path
) -> None:
    out = io.StringIO()
    board = cls(log_path=str(tmp_path), file=out, force_terminal=False, show_memory=False)
    with pytest.raises(ValueError, match="stage") as err:
        board.gauge({"loss": 0.5}, 0, 0, 1, stage)
    assert repr(stage) in str(err.value), err.value  # says what was received
    assert board.snapshot().stages == []
    board.log()
    board.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert out.getvalue() == ""


@pytest.mark.parametrize("stage", [0, None, b"train"])
def test_stage_that_is_not_text_is_refused(stage: object, tmp_path: Path) -> None:
    board = Dashboard(log_path=str(tmp_path), file=io.StringIO(), force_terminal=False)
    with pytest.raises(TypeError, match="stage"):
        board.gauge({"loss": 0.5}, 0, 0, 1, stage)  # type: ignore[arg-type]
    board.close()


def test_unicode_stage_names_are_kept(tmp_path: Path) -> None:
    out = io.StringIO()
    with Dashboard(log_path=str(tmp_path), file=out, force_terminal=False) as board:
        board.gauge({"loss": 0.5}, 0, 0, 1, "验证 val")
    assert [s.name for s in board.snapshot().stages] == ["验证 val"]
    board.log(gauge=False)
    assert "验证 val,0,0,1,0.5" in (tmp_path / "loss.csv").read_text(encoding="utf-8")
