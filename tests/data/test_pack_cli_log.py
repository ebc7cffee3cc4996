"""``scramjet pack`` with its output going to files, as in a batch job or CI log."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from PIL import Image


def test_pack_into_a_log_file_writes_only_its_report(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    rows = []
    for i in range(3):
        pixels = np.full((10, 12, 3), 40 * i, np.uint8)
        Image.fromarray(pixels).save(images / f"{i}.png")
        rows.append(f"{i}.png,{i}")
    (images / "list.csv").write_text("image,label\n" + "\n".join(rows) + "\n")
    cmd = [sys.executable, "-m", "scramjet", "pack", str(images), str(images / "list.csv")]
    cmd += [str(tmp_path / "out.pack"), "--dtype", "int64", "--height", "8", "--width", "8"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("packed 3 samples into 1 shards")
    assert done.stderr == ""  # the hidden progress bar left a blank line in stderr's log
