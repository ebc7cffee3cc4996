"""What the dashboard logs is what it was given: one-element float64 and int64 tensors
keep their digits (they went through float32: 1e300 was logged as inf, 1e-50 as 0 and
16777217 as 16777216), and the CSV's step column is an exact integer past a million
(it was written as 1.234e+06, so rows of a long run had equal steps)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import torch

from scramjet.dashboard import Dashboard


def _rows(folder: Path, metric: str) -> list[dict[str, str]]:
    with open(folder / f"{metric}.csv", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_tensor_values_and_large_steps_are_logged_exactly(tmp_path: Path) -> None:
    given = {
        "big": torch.tensor(1e300, dtype=torch.float64),
        "tenth": torch.tensor(0.1, dtype=torch.float64),
        "count": torch.tensor(16777217, dtype=torch.int64),
        "small": torch.tensor(1e-50, dtype=torch.float64),
    }
    out = io.StringIO()
    with Dashboard(log_path=str(tmp_path / "logs"), file=out, show_memory=False) as board:
        for mile in range(3):
            board.gauge(given, mile, 0, 3, "train")
        board.log(gauge=False)
    for name, value in given.items():
        rows = _rows(tmp_path / "logs", name)
        assert [float(r["value"]) for r in rows] == [value.item()] * 3, (name, rows)
    steps = [r["step"] for r in _rows(tmp_path / "logs", "big")]
    assert steps == ["1", "2", "3"]
    assert "1e+300" in out.getvalue() and "inf" not in out.getvalue()


def test_steps_past_a_million_are_whole_numbers(tmp_path: Path) -> None:
    with Dashboard(log_path=str(tmp_path / "logs"), file=io.StringIO(), show_memory=False) as board:
        for mile in range(3):  # epoch 1234 of 1000 steps each: steps 1234001 to 1234003
            board.gauge({"loss": 0.5}, mile, 1234, 1000, "train")
        board.log(gauge=False)
    assert [r["step"] for r in _rows(tmp_path / "logs", "loss")] == [
        "1234001",
        "1234002",
        "1234003",
    ]
