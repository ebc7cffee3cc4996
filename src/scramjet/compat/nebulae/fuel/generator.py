"""nebulae's ``FuelGenerator`` over :func:`scramjet.data.pack`.

``generate(dst_path)`` writes what the path names: a ``.hdf5``/``.h5`` path gets one
HDF5 file (readable with ``h5py``), a ``.npz`` path one numpy ``.npz`` file, any other
path a pack directory (``manifest.json`` plus ``shard-*.h5``). All three hold the same
pack layout (``scramjet/data/FORMAT.md``) and are read back by
:class:`~scramjet.compat.nebulae.fuel.tank.Tank`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scramjet.compat.nebulae.fuel._files import is_file_target, write_file_pack
from scramjet.data.writer import PackReport, pack

__all__ = ["FuelGenerator"]

_SOURCE_KEYS = ("file_dir", "file_list", "dtype", "is_seq")
_OUTPUT_KEYS = ("height", "width", "channel", "encode", "shards", "keep_exif")
_EXTRA_KEYS = ("quality", "exif_orientation", "workers", "pool", "on_error", "progress")


def resolve_file_list(file_dir: str | os.PathLike[str], file_list: str | os.PathLike[str]) -> Path:
    """``file_list`` as nebulae reads it: relative paths are relative to ``file_dir``.

    Raises:
        FileNotFoundError: naming ``file_dir``, ``file_list`` and the path looked at.
    """
    listed = Path(file_list)
    path = listed if listed.is_absolute() else Path(file_dir) / listed
    if path.is_file():
        return path
    hint = ""
    if not listed.is_absolute() and listed.is_file():
        hint = (
            f" A file {str(listed)!r} exists relative to the current directory: pass it "
            f"relative to file_dir, or as an absolute path ({str(listed.resolve())!r})."
        )
    raise FileNotFoundError(
        f"file_list {str(file_list)!r} was not found in file_dir {str(file_dir)!r} (looked "
        f"for {str(path)!r}). As in nebulae, a relative file_list is a path inside "
        f"file_dir.{hint}"
    )


class FuelGenerator:
    """Pack raw images and labels listed in a CSV file (nebulae's ``FuelGenerator``).

    Args:
        file_dir: where the raw data is.
        file_list: CSV list (header; image path first, then value columns); a relative
            path is relative to ``file_dir``, as are the image paths it lists.
        dtype: dtypes of the value columns (``'int64'``, ``'str'``, ``'vuint8'``...).
        is_seq: rows are frame sequences.
        config: a dict with the same keys (and optionally ``height``, ``width``,
            ``channel``, ``encode``, ``shards``, ``keep_exif``, and :func:`~scramjet.data.pack`'s
            ``quality``, ``exif_orientation``, ``workers``, ``pool``, ``on_error``,
            ``progress``); exclusive with the others.

    Example:
        >>> import numpy as np
        >>> from pathlib import Path
        >>> from PIL import Image
        >>> Path("raw").mkdir()
        >>> for i in range(4):
        ...     Image.fromarray(np.full((20, 30, 3), 50 * i, np.uint8)).save(f"raw/{i}.jpg")
        >>> rows = "".join(f"{i}.jpg\\t{i % 2}\\n" for i in range(4))
        >>> _ = Path("raw/list.csv").write_text("image\\tlabel\\n" + rows)
        >>> fg = FuelGenerator("raw", "list.csv", ["int64"], False)
        >>> _ = fg.generate("train.hdf5", 16, 16, progress=False, workers=0)
        >>> Path("train.hdf5").is_file()
        True
    """

    def __init__(
        self,
        file_dir: str | Mapping[str, Any] | None = None,
        file_list: str | None = None,
        dtype: list[str] | None = None,
        is_seq: bool = False,
        *,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        if isinstance(file_dir, Mapping):  # FuelGenerator(config) passed positionally
            config, file_dir = file_dir, None
        given = file_dir is not None or file_list is not None or dtype is not None
        if config is not None and given:
            raise ValueError("pass either config= or file_dir/file_list/dtype, not both")
        self.params: dict[str, Any] = {
            "is_seq": False,
            "channel": 3,
            "encode": "jpeg",
            "shards": 1,
            "keep_exif": True,
        }
        if config is not None:
            self.modify(config=config)
        else:
            self.modify(file_dir=file_dir, file_list=file_list, dtype=dtype, is_seq=is_seq)

    def modify(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        """Change properties (``fg.modify(height=200, width=200)`` or ``config={...}``)."""
        changes = {**(dict(config) if config else {}), **kwargs}
        valid = _SOURCE_KEYS + _OUTPUT_KEYS + _EXTRA_KEYS
        unknown = sorted(set(changes) - set(valid))
        if unknown:
            raise ValueError(f"unknown FuelGenerator properties {unknown}; valid: {list(valid)}")
        self.params.update(changes)

    def _settings(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The generator's properties, overridden by the arguments that are not None."""
        p = {**self.params, **{k: v for k, v in given.items() if v is not None}}
        missing = [
            k for k in ("file_dir", "file_list", "dtype", "height", "width") if p.get(k) is None
        ]
        if missing:
            raise ValueError(f"FuelGenerator.generate needs {missing}; set them or pass them")
        return p

    def generate(
        self,
        dst_path: str | os.PathLike[str],
        height: int | None = None,
        width: int | None = None,
        channel: int | None = None,
        encode: str | None = None,
        shards: int | None = None,
        keep_exif: bool | None = None,
        **kwargs: Any,
    ) -> PackReport:
        """Write the data to ``dst_path``, replacing what was there.

        ``.hdf5``/``.h5``: one HDF5 file; ``.npz``: one numpy npz file; with ``shards=k``
        > 1 the files are ``<stem>_0<suffix>`` ... ``<stem>_<k-1><suffix>``. Any other
        path: a pack directory with ``k`` shard files. Files are written whole, then
        moved into place, so a failed run leaves the old data untouched.

        Arguments left as None take the generator's properties. Extra keyword arguments
        (``quality``, ``exif_orientation``, ``workers``, ``pool``, ``on_error``,
        ``overwrite``, ``progress``) go to :func:`scramjet.data.pack`; all but
        ``overwrite`` can also be set as properties (``modify``, ``config``).
        """
        given = {
            "height": height,
            "width": width,
            "channel": channel,
            "encode": encode,
            "shards": shards,
            "keep_exif": keep_exif,
        }
        p = self._settings(given)
        extra = {k: p[k] for k in _EXTRA_KEYS if k in p}
        extra.setdefault("overwrite", True)
        extra.update(kwargs)
        file_list = resolve_file_list(p["file_dir"], p["file_list"])

        def run(dst: str | os.PathLike[str], **more: Any) -> PackReport:
            return pack(
                p["file_dir"],
                file_list,
                dst,
                dtype=p["dtype"],
                height=p["height"],  # as given: pack() refuses 32.5 instead of packing 32
                width=p["width"],
                channel=p["channel"],
                encode=str(p["encode"]).lower(),
                shards=p["shards"],
                keep_exif=_flag(p["keep_exif"]),
                is_seq=_flag(p["is_seq"]),
                **{**extra, **more},
            )

        if not is_file_target(dst_path):
            return run(dst_path)
        dst = Path(dst_path).absolute()
        return write_file_pack(dst, int(p["shards"]), lambda d: run(d, overwrite=False))


def _flag(value: Any) -> Any:
    """A yes/no setting: 0 and 1 read as False and True; anything else but a bool goes to
    ``pack``, which refuses it with the fix (``bool("False")`` would have been True)."""
    return bool(value) if type(value) is int and value in (0, 1) else value
