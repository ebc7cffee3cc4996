"""``pack(..., overwrite=True)`` swaps the new pack in for the old one in one step: a reader
opening the pack while it is overwritten again and again finds the old pack or the new
one, each whole, never no pack at all (the old pack moved aside, the new one not yet in
place)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from scramjet.data import _publish, pack
from scramjet.data._publish import publish

# Opens the pack's manifest (as every reader does first) and checks the shards it names,
# in a tight loop, until told to stop: prints how many opens worked and how many missed.
_READER = textwrap.dedent(
    """
    import os, sys
    from scramjet.data.format import Manifest, PackFormatError
    dst, stop = sys.argv[1], sys.argv[2]
    open(stop + ".ready", "w").close()
    opened = missing = 0
    while not os.path.exists(stop):
        try:
            manifest = Manifest.load(dst)
        except (FileNotFoundError, PackFormatError):
            missing += 1
            continue
        labels = manifest.extra["labels"]
        assert labels in ([0, 1, 2], [100, 101, 102]), labels
        if all(os.path.isfile(os.path.join(dst, s.file)) for s in manifest.shards):
            opened += 1
        else:  # the shards are named alike in both packs: one is always there
            missing += 1
    print(opened, missing)
    """
)


def _made(root: Path, dst: Path, offset: int) -> Path:
    labels = [offset + i for i in range(3)]
    (root / "list.csv").write_text(
        "image,label\n" + "".join(f"{i}.png,{v}\n" for i, v in enumerate(labels))
    )
    pack(root, root / "list.csv", dst, dtype=["int64"], height=4, width=4, workers=0,
         progress=False)  # fmt: skip
    text = (dst / "manifest.json").read_text()  # which pack a reader found, at a glance
    (dst / "manifest.json").write_text(
        text.replace('"extra": {', f'"extra": {{"labels": {labels}, ', 1)
    )
    return dst


def test_a_reader_never_finds_the_pack_missing_while_it_is_overwritten(tmp_path: Path) -> None:
    root = tmp_path / "raw"
    root.mkdir()
    for i in range(3):
        Image.fromarray(np.full((4, 4, 3), i, np.uint8)).save(root / f"{i}.png")
    made = [_made(root, tmp_path / f"made-{offset}", offset) for offset in (0, 100)]
    dst = tmp_path / "p.pack"
    shutil.copytree(made[0], dst)
    stop = tmp_path / "stop"
    reader = subprocess.Popen(
        [sys.executable, "-c", _READER, str(dst), str(stop)], stdout=subprocess.PIPE, text=True
    )
    n = 0
    try:
        ready = time.monotonic() + 60
        while not Path(f"{stop}.ready").exists() and time.monotonic() < ready:
            time.sleep(0.01)
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            tmp = tmp_path / f".p.pack.partial-{n}"
            shutil.copytree(made[n % 2], tmp)
            publish(tmp, dst, overwrite=True)
            n += 1
    finally:
        stop.touch()
        out, _ = reader.communicate(timeout=60)
    assert reader.returncode == 0, out
    opened, missing = map(int, out.split())
    assert opened > 0, out
    assert missing == 0, f"{missing} of {opened + missing} opens found no pack in {n} overwrites"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_where_the_swap_is_refused_the_old_pack_is_moved_aside_then_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A filesystem or kernel without RENAME_EXCHANGE: the two renames still replace the pack.
    monkeypatch.setattr(_publish, "_exchange", lambda a, b: False)
    root = tmp_path / "raw"
    root.mkdir()
    for i in range(3):
        Image.fromarray(np.full((4, 4, 3), i, np.uint8)).save(root / f"{i}.png")
    dst = _made(root, tmp_path / "p.pack", 0)
    (root / "list.csv").write_text(
        "image,label\n" + "".join(f"{i}.png,{7 + i}\n" for i in range(3))
    )
    pack(root, root / "list.csv", dst, dtype=["int64"], height=4, width=4, workers=0,
         progress=False, overwrite=True)  # fmt: skip
    assert "labels" not in (dst / "manifest.json").read_text()  # the new pack, whole
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
