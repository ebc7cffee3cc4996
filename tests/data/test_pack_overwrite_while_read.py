"""A pack replaced with ``pack(..., overwrite=True)`` while a dataset reads it: the shards
it has open go on serving the old samples, and a shard it opens only afterwards is
refused as replaced (open the pack again), never reported as a corrupted file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from scramjet.data import PackedDataset, PackFormatError, pack


def _pack(root: Path, dst: Path, offset: int) -> None:
    (root / "list.csv").write_text(
        "image,label\n" + "".join(f"{i}.png,{offset + i}\n" for i in range(12))
    )
    pack(root, root / "list.csv", dst, dtype=["int64"], height=8, width=8, shards=3,
         workers=0, progress=False, overwrite=True)  # fmt: skip


@pytest.mark.parametrize("verify", ["open", False, True])
def test_a_shard_opened_after_an_overwrite_is_named_as_replaced(
    tmp_path: Path, verify: bool | str
) -> None:
    # verify=False (no hash) and verify=True (every shard hashed when the dataset was
    # made) read a shard opened after the overwrite from the new pack: two packs' samples
    # mixed in one dataset.
    root = tmp_path / "raw"
    root.mkdir()
    for i in range(12):
        Image.fromarray(np.full((8, 8, 3), i, np.uint8)).save(root / f"{i}.png")
    dst = tmp_path / "p.pack"
    _pack(root, dst, 0)
    ds = PackedDataset(dst, verify=verify)
    assert int(ds[0]["label"]) == 0  # shard 0 open
    _pack(root, dst, 100)
    assert int(ds[1]["label"]) == 1  # an open shard keeps the samples it had
    with pytest.raises(PackFormatError) as err:
        ds[11]  # shard 2: first opened after the overwrite
    message = str(err.value)
    assert "replaced" in message and "corrupted" not in message, message
    assert "PackedDataset(" in message, message
    assert int(PackedDataset(dst)[11]["label"]) == 111  # opened again: the new pack
