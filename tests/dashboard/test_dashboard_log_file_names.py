"""``Dashboard.log()`` writes one CSV per metric, whatever the metric is named."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from scramjet.dashboard import Dashboard


def _logged(tmp_path: Path, entry: dict[str, float]) -> dict[float, Path]:
    """Log ``entry`` once; return {value: the CSV file that holds it}."""
    board = Dashboard(log_path=str(tmp_path / "logs"), file=io.StringIO(), show_memory=False)
    board.gauge(entry, 0, 0, 1, "eval")
    board.log(gauge=False)
    board.close()
    found: dict[float, Path] = {}
    for path in sorted((tmp_path / "logs").glob("*.csv")):
        with open(path, encoding="utf-8") as f:
            for row in csv.DictReader(f):
                found[float(row["value"])] = path
    return found


@pytest.mark.parametrize(
    "names",
    [
        ("損失", "精度"),  # non-Latin names: each its own file, not both 'metric.csv'
        ("val/acc", "val_acc"),  # made file-safe into the same name
        ("acc.top1", "acc.top5"),  # a dot is no file suffix to replace
        ("Loss", "loss"),  # one file on case-insensitive file systems
    ],
)
def test_every_metric_keeps_its_own_csv(tmp_path: Path, names: tuple[str, str]) -> None:
    found = _logged(tmp_path, {names[0]: 1.0, names[1]: 2.0})
    assert set(found) == {1.0, 2.0}, f"a metric's values were overwritten: {found}"
    assert found[1.0].name.casefold() != found[2.0].name.casefold()


def test_a_name_that_is_already_safe_keeps_its_file_name(tmp_path: Path) -> None:
    found = _logged(tmp_path, {"val_acc": 1.0, "val/acc": 2.0, "損失": 3.0, "acc.top1": 4.0})
    assert found[1.0].name == "val_acc.csv"
    assert found[3.0].name == "損失.csv"
    assert found[4.0].name == "acc.top1.csv"


def test_a_very_long_metric_name_is_logged(tmp_path: Path) -> None:
    found = _logged(tmp_path, {"x" * 300: 1.0, "x" * 299 + "y": 2.0})
    assert set(found) == {1.0, 2.0}
    assert all(len(path.name.encode()) <= 128 for path in found.values())


@pytest.mark.parametrize("name", [".", ".."])
def test_a_metric_named_like_a_folder_is_written_inside_log_path(tmp_path: Path, name: str) -> None:
    # "." became <log_path>.csv beside the folder; ".." its parent's
    found = _logged(tmp_path, {name: 1.0, "loss": 2.0})
    assert set(found) == {1.0, 2.0}
    assert all(path.parent == tmp_path / "logs" for path in found.values()), found
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs"]
