"""The reliability index (README.md in this folder) names only tests that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_indexed_test_exists() -> None:
    text = (Path(__file__).parent / "README.md").read_text()
    entries = re.findall(r"\| (tests/\S+\.py)::(test_\w+) \|", text)
    assert len(entries) >= 30, "the index lost its entries"
    missing = [
        f"{path}::{name}"
        for path, name in entries
        if not (ROOT / path).is_file()
        or not re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.M)
    ]
    assert not missing, f"the index names tests that do not exist: {missing}"
