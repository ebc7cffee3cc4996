"""The checks of a pack on local disk that :class:`~scramjet.data.PackedDataset` makes:
its shard files present at their sizes, their SHA-256 against the manifest (``verify``),
and a pack written again in place (``pack(..., overwrite=True)``) while it is read."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from scramjet.data.format import (
    MANIFEST_NAME,
    Manifest,
    PackFormatError,
    file_sha256,
    shard_path,
)


def file_id(path: Path) -> tuple[int, int, int] | None:
    """A file's identity: a pack written again (a new folder renamed in place) changes it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns


class LocalPackChecks:
    """Shard checks of a dataset over a pack (a mixin of ``PackedDataset``)."""

    manifest: Manifest
    path: Path | str
    _remote: Any
    _files: list[Path]
    _verified: set[int]

    def _check_files(self) -> list[Path]:
        files = []
        for info in self.manifest.shards:
            file = shard_path(self.path, info.file)
            if not file.is_file():
                raise PackFormatError(f"shard {info.file} of pack {str(self.path)!r} is missing")
            size = file.stat().st_size
            if size != info.bytes:
                raise PackFormatError(
                    f"shard {info.file} has {size} bytes, the manifest says {info.bytes}: "
                    "the file is truncated or was modified; re-create the pack"
                )
            files.append(file)
        return files

    def _verify_shard(self, k: int, digest: str | None = None) -> None:
        info = self.manifest.shards[k]
        if self._remote is not None:  # every download is checked before it enters the cache
            self._verified.add(k)
            return
        if (digest or file_sha256(self._files[k])) != info.sha256:
            if self._replaced_on_disk():
                raise self._replaced_error(k)
            raise PackFormatError(
                f"shard {info.file} of pack {str(self.path)!r} fails its SHA-256 check: "
                "the file is corrupted; re-create or re-copy the pack (verify=False reads "
                "it unchecked)"
            )
        self._verified.add(k)

    def _replaced_error(self, k: int) -> PackFormatError:
        return PackFormatError(
            f"shard {self.manifest.shards[k].file} of pack {str(self.path)!r} was replaced: "
            "the pack was written again (pack(..., overwrite=True)) after this dataset "
            "opened it. Open it again, PackedDataset(path), to read the new pack"
        )

    def _manifest_moved(self) -> bool:
        """Whether the pack on disk is another one than this dataset opened, checked
        without hashing (a stat, then the manifest only when the file changed): so that
        ``verify=False``, and shards verified before, never mix two packs' samples."""
        opened = self.__dict__.get("_manifest_id")
        if opened is None or file_id(Path(self.path) / MANIFEST_NAME) == opened:
            return False
        return self._replaced_on_disk()

    def _replaced_on_disk(self) -> bool:
        """Whether the pack's manifest on disk now lists other shards than the one this
        dataset opened (the pack was re-packed in place since)."""
        try:
            now = Manifest.load(self.path)
        except (OSError, PackFormatError, ValueError):
            return False
        return [s.sha256 for s in now.shards] != [s.sha256 for s in self.manifest.shards]

    def verify(self) -> None:
        """Hash every shard not yet verified by this dataset and compare with the manifest.

        Copies of the dataset made afterwards (DataLoader workers, pickles) skip the
        shards verified here.

        Raises:
            PackFormatError: naming the first shard whose SHA-256 differs.
        """
        todo = [k for k in range(len(self.manifest.shards)) if k not in self._verified]
        if self._remote is not None:
            return  # streamed shards are verified as they download, before any use
        if len(todo) < 2:
            for k in todo:
                self._verify_shard(k)
            return
        # hashlib releases the GIL on large blocks: shards hash in parallel on threads.
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        workers = min(len(todo), cores or os.cpu_count() or 1, 8)
        with ThreadPoolExecutor(workers) as pool:
            digests = list(pool.map(file_sha256, [self._files[k] for k in todo]))
        for k, digest in zip(todo, digests):
            self._verify_shard(k, digest)

    @property
    def verified_shards(self) -> set[int]:
        """Indices of the shards whose SHA-256 this dataset (or its parent) has checked."""
        return set(self._verified)
