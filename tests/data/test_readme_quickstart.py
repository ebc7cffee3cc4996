"""The README's packed-data quickstart runs as written (smaller sizes, in a temp folder)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from PIL import Image

README = Path(__file__).resolve().parents[2] / "README.md"

# (text in the README, what the test runs instead): sizes and epochs made small
SHRINK = [
    ("height=224, width=224", "height=32, width=32"),
    ("range(10)", "range(2)"),
    ("num_epochs=10", "num_epochs=2"),
    ("num_workers=4", "num_workers=2"),
    ('"num_workers": 4', '"num_workers": 2'),
]


def quickstart_code() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Quickstart: packed datasets")
    section = text[start : text.index("\n## ", start + 1)]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2, "the section has the pack/loader block and the Trainer block"
    code = "\n".join(blocks)
    for old, new in SHRINK:
        assert old in code, f"the README quickstart no longer contains {old!r}"
        code = code.replace(old, new)
    return code


def test_readme_packed_data_quickstart_trains(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "photos" / "cat").mkdir(parents=True)
    rng = np.random.default_rng(0)
    rows = []
    for i in range(24):
        pixels = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(tmp_path / "photos" / "cat" / f"{i:03d}.jpg")
        rows.append(f"cat/{i:03d}.jpg\t{i % 3}\n")
    (tmp_path / "photos" / "list.csv").write_text("image\tlabel\n" + "".join(rows))
    namespace: dict = {"__name__": "readme_quickstart"}
    exec(compile(quickstart_code(), str(README), "exec"), namespace)
    assert tuple(namespace["images"].shape[1:]) == (3, 32, 32)
    history = namespace["trainer"].run_history.get_metric_values("train_loss_epoch")
    assert len(history) == 2 and all(np.isfinite(history))
    assert namespace["train"].epoch == 1  # the callback moved the augmentations' epoch
