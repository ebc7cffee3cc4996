"""README tables checked against the code and the measured figures they quote."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
TICKED = re.compile(r"`([^`]+)`")


def _table_rows(heading: str) -> list[list[str]]:
    """The cells of each body row of the first table after ``heading``."""
    section = README.split(heading, 1)[1]
    rows: list[list[str]] = []
    for line in section.splitlines():
        if rows and not line.startswith("|"):
            break
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows[1:]  # without the header


def test_pytorch_accelerated_names_said_to_be_in_a_module_import_from_it() -> None:
    rows = [r for r in _table_rows("### pytorch-accelerated") if r[1].startswith("same names in `")]
    assert rows, "the table has a row of names kept under scramjet's compat package"
    for names, where, _ in rows:
        package = TICKED.findall(where)[0]
        for dotted in TICKED.findall(names):
            module, _, name = dotted.rpartition(".")
            target = f"{package}.{module}" if module else package
            imported = importlib.import_module(target)
            assert hasattr(imported, name), (
                f"README says `{dotted}` is under `{package}`, but "
                f"`from {target} import {name}` fails"
            )


def _normalised(text: str) -> str:
    return re.sub(r"\s+%", "%", text)


def test_accuracy_figures_of_the_acceleration_table_are_the_measured_ones() -> None:
    table = "\n".join(" | ".join(r) for r in _table_rows("What each option does to speed"))
    measured = _normalised(
        "\n".join(
            (ROOT / page).read_text()
            for page in ("docs/acceleration.md", "docs/bench/accel.md", "docs/benchmarks.md")
        )
    )
    figures = re.findall(r"\d+(?:\.\d+)?e-\d+|\d+(?:\.\d+)?–\d+(?:\.\d+)?%", _normalised(table))
    assert len(figures) >= 4, figures
    quoted = [f for f in figures if f not in measured]
    assert not quoted, f"README figures found in no benchmark page: {quoted}"
