"""atomic_write: a failed write leaves the previous file and no temporary behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from scramjet.runtime import atomic_write


@pytest.mark.parametrize("fsync", [True, False])
def test_atomic_write_replaces_or_keeps_the_old_file(tmp_path: Path, fsync: bool) -> None:
    target = tmp_path / "state.bin"
    big = bytes(range(256)) * (1 << 18)  # 64 MiB: crosses the sync-ahead threshold twice
    atomic_write(
        target,
        lambda f: [f.write(big[i : i + (1 << 20)]) for i in range(0, len(big), 1 << 20)],
        fsync=fsync,
    )
    assert target.read_bytes() == big

    def fail_halfway(f: object) -> None:
        f.write(b"partial")  # type: ignore[attr-defined]
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, fail_halfway, fsync=fsync)
    assert target.read_bytes() == big
    assert [p.name for p in tmp_path.iterdir()] == ["state.bin"]
