"""A pack removed while ``Manifest.load`` opens it reports the clear "no pack" error."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from packdata_helpers import small_pack

from scramjet.data.format import MANIFEST_NAME, Manifest, PackFormatError


def test_pack_deleted_between_check_and_read(folder, tmp_path, monkeypatch):
    root, _ = folder
    dst = tmp_path / "p"
    small_pack(root, root / "list.csv", dst)
    real_is_file = Path.is_file

    def is_file_then_vanish(self: Path) -> bool:
        found = real_is_file(self)
        if self.name == MANIFEST_NAME:
            shutil.rmtree(dst)  # another process replaces/deletes the pack right now
        return found

    monkeypatch.setattr(Path, "is_file", is_file_then_vanish)
    with pytest.raises(PackFormatError, match=r"no pack at .*does not exist"):
        Manifest.load(dst)
