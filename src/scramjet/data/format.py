"""The on-disk layout of a pack (see ``FORMAT.md`` next to this file).

Everything here is plain data: column specs, value parsing for CSV cells, the JSON
manifest and shard checksums. No pickle is used anywhere in the format.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

FORMAT_NAME = "scramjet-pack"
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
OFFSETS_GROUP = "_offsets"  # byte/element offsets of variable-length items
ROWS_GROUP = "_rows"  # frame offsets of sequence rows
ENCODINGS = ("jpeg", "png", "raw")

#: Scalar dtypes a value column may have (a ``v`` prefix makes any of them variable length).
VALUE_DTYPES = (
    "bool",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "float32",
    "float64",
    "str",
)

_TRUE = {"1", "true", "t", "yes", "y"}
_FALSE = {"0", "false", "f", "no", "n"}


class PackFormatError(ValueError):
    """A pack on disk is missing, incomplete, corrupted or of an unknown version."""


def shard_name(index: int) -> str:
    """File name of shard ``index`` inside a pack directory."""
    return f"shard-{index:05d}.h5"


def parse_dtype(spec: str) -> tuple[str, bool]:
    """Split a column dtype such as ``"vuint8"`` into ``("uint8", True)``.

    Args:
        spec: one of :data:`VALUE_DTYPES`, optionally prefixed with ``v``.

    Returns:
        The base dtype and whether the column is variable length (``str`` always is).

    Raises:
        ValueError: for an unknown dtype.
    """
    if not isinstance(spec, str):
        raise TypeError(f"dtype entries must be strings such as 'int64', got {spec!r}")
    name = spec.strip().lower()
    if name == "vstr":
        raise ValueError(
            f"dtype {spec!r} is not supported: a 'str' column holds one text per row, not a "
            "list of texts (a cell 'cat,dog' would be kept as the one text 'cat,dog'). For "
            "several labels per row, number them and use 'vint64' (or 'vint32'), or use "
            "'str' and split the text yourself"
        )
    variable = False
    if name not in VALUE_DTYPES and name.startswith("v") and name[1:] in VALUE_DTYPES:
        name, variable = name[1:], True
    if name not in VALUE_DTYPES:
        raise ValueError(
            f"unknown column dtype {spec!r}; expected one of {', '.join(VALUE_DTYPES)}, "
            "optionally prefixed with 'v' for variable length (e.g. 'vint64')"
        )
    return name, variable or name == "str"


def parse_scalar(text: str, dtype: str) -> Any:
    """Parse one CSV token into a value of ``dtype``, strictly.

    Booleans accept ``1/0, true/false, t/f, yes/no, y/n`` (any case); ``"False"`` is
    False. Integers must be integral and inside the dtype's range. Floats must be finite
    in the dtype (``1e6`` overflows ``float16``); ``"inf"`` and ``"nan"`` written out are
    kept. Finite values are rounded to the dtype's precision.

    Raises:
        ValueError: when the token is not a valid ``dtype`` value.
    """
    token = text.strip()
    if dtype == "str":
        return text
    if dtype == "bool":
        low = token.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ValueError(f"{text!r} is not a boolean; expected one of 1/0, true/false, yes/no")
    if "_" in token and dtype != "bool":  # int() and float() read 1_000 as 1000: a typo
        raise ValueError(
            f"{text!r} holds an underscore, which is not part of a {dtype} value; write the "
            f"number's digits only (1000, 10.5)"
        )
    if dtype.startswith(("int", "uint")):
        try:
            value = int(token)
        except ValueError:
            raise ValueError(f"{text!r} is not an integer (column dtype {dtype})") from None
        info = np.iinfo(np.dtype(dtype))
        if not info.min <= value <= info.max:
            raise ValueError(f"{value} is outside the range of {dtype} [{info.min}, {info.max}]")
        return value
    try:
        number = float(token)
    except ValueError:
        raise ValueError(f"{text!r} is not a number (column dtype {dtype})") from None
    if math.isinf(number) and "inf" in token.lower():
        return number  # an explicit "inf" / "-inf" / "infinity" is stored as written
    with np.errstate(over="ignore"):
        stored = np.asarray(number).astype(dtype)
    if np.isinf(stored):
        limit = float(np.finfo(np.dtype(dtype)).max)
        wider = [
            w for w in ("float32", "float64") if np.dtype(w).itemsize > np.dtype(dtype).itemsize
        ]
        fix = (
            f"use the dtype {' or '.join(repr(w) for w in wider)}"
            if wider
            else "scale the column's values down"
        )
        raise ValueError(
            f"{token!r} is outside the range of {dtype} [{-limit:g}, {limit:g}] and would be "
            f"stored as inf; {fix}, or write 'inf' if infinity is meant"
        )
    return number


def split_list(text: str) -> list[str]:
    """Split a list cell (``"1,2,3"`` or ``"1 2 3"``) into its non-empty tokens."""
    return [tok for tok in text.replace(",", " ").split() if tok]


@dataclass
class ColumnSpec:
    """One column of a pack, as written in the manifest.

    Attributes:
        name: column name (from the CSV header).
        kind: ``"image"`` for the first column, ``"value"`` for the others.
        dtype: numpy dtype name of stored values (``uint8`` for images, ``str`` for text).
        variable: whether rows have variable length (``_offsets/<name>`` holds the offsets).
        encoding: ``jpeg``, ``png`` or ``raw`` for image columns.
        quality: JPEG quality used when packing.
        height: image height in pixels.
        width: image width in pixels.
        channels: 3 (RGB) or 1 (grayscale).
        sequence: whether each row is a sequence of frames (``_rows/<name>``).
        keep_exif: whether EXIF was kept in encoded images.
    """

    name: str
    kind: str
    dtype: str
    variable: bool = False
    encoding: str | None = None
    quality: int | None = None
    height: int | None = None
    width: int | None = None
    channels: int | None = None
    sequence: bool = False
    keep_exif: bool | None = None


@dataclass
class ShardInfo:
    """One shard file: name, sample count, byte size and SHA-256 of the whole file."""

    file: str
    samples: int
    bytes: int
    sha256: str


@dataclass
class Manifest:
    """The JSON manifest of a pack (``manifest.json``).

    Attributes:
        columns: column specs, image column first.
        shards: shard files in global index order.
        version: format version (see ``FORMAT.md``).
        format: always ``"scramjet-pack"``.
        created_by: writer name and version.
    """

    columns: list[ColumnSpec]
    shards: list[ShardInfo]
    version: int = FORMAT_VERSION
    format: str = FORMAT_NAME
    created_by: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def num_samples(self) -> int:
        """Total number of samples over all shards."""
        return sum(s.samples for s in self.shards)

    def to_json(self) -> str:
        """Serialise to JSON text."""
        data = asdict(self)
        data["num_samples"] = self.num_samples
        return json.dumps(data, indent=2)

    @classmethod
    def from_json(cls, text: str, where: str = "manifest") -> Manifest:
        """Parse and validate manifest JSON text.

        Raises:
            PackFormatError: on a foreign file or an unsupported version.
        """
        try:
            data = json.loads(text)
            if data.get("format") != FORMAT_NAME:
                raise PackFormatError(
                    f"{where} is not a scramjet pack manifest (format={data.get('format')!r})"
                )
            if int(data["version"]) > FORMAT_VERSION:
                raise PackFormatError(
                    f"{where} has format version {data['version']}, this scramjet reads "
                    f"up to {FORMAT_VERSION}; upgrade scramjet to read it"
                )
            shards = [ShardInfo(**s) for s in data["shards"]]
            manifest = cls(
                columns=[ColumnSpec(**c) for c in data["columns"]],
                shards=shards,
                version=int(data["version"]),
                created_by=data.get("created_by", ""),
                extra=data.get("extra", {}),
            )
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            raise PackFormatError(f"{where} is not a valid pack manifest: {exc}") from exc
        for k, info in enumerate(shards):
            check_shard_info(k, info, where)
        total = data.get("num_samples")
        if total is not None and total != manifest.num_samples:
            raise PackFormatError(
                f"{where} says num_samples={total!r}, but its shards list "
                f"{manifest.num_samples} samples; the manifest was modified, re-create the pack"
            )
        return manifest

    @classmethod
    def load(cls, pack_dir: str | os.PathLike[str]) -> Manifest:
        """Read ``manifest.json`` from a pack directory.

        Raises:
            PackFormatError: when the directory holds no complete pack.
        """
        path = Path(pack_dir) / MANIFEST_NAME
        if not path.is_file():
            raise PackFormatError(no_pack_message(Path(pack_dir)))
        try:
            text = path.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            # removed or replaced (e.g. by a rerun of pack) since the check above
            raise PackFormatError(no_pack_message(Path(pack_dir))) from None
        return cls.from_json(text, where=str(path))


def _packs_in(folder: Path, limit: int = 2000) -> list[str]:
    """Names of the packs (directories with a manifest) in ``folder``, sorted; only the
    first ``limit`` entries are looked at, so that a huge folder stays cheap."""
    found = []
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for n, entry in enumerate(entries):
            if n >= limit:
                break
            with contextlib.suppress(OSError):
                if entry.is_dir() and (Path(entry.path) / MANIFEST_NAME).is_file():
                    found.append(entry.name)
    return sorted(found)


def _named(packs: list[str], near: str = "") -> str:
    import difflib

    close = difflib.get_close_matches(near, packs, n=1) if near else []
    shown = ", ".join(packs[:8]) + (f" and {len(packs) - 8} more" if len(packs) > 8 else "")
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{shown}{hint}"


def no_pack_message(root: Path) -> str:
    """Why ``root`` is not a pack, and what is near it: a path that does not exist, a
    file, or a directory without a manifest (naming the packs beside or inside it)."""
    fix = f"pass the directory written by scramjet.data.pack (it holds {MANIFEST_NAME})"
    if not root.exists():
        parent = root.parent if str(root.parent) else Path(".")
        packs = _packs_in(parent) if parent.is_dir() else []
        beside = (
            f" Packs in {str(parent)!r}: {_named(packs, root.name)}."
            if packs
            else f" {str(parent)!r} holds no pack."
            if parent.is_dir()
            else f" Its folder {str(parent)!r} does not exist either."
        )
        return (
            f"no pack at {str(root)!r}: the path does not exist, so its {MANIFEST_NAME} is "
            f"missing.{beside} Check the path; {fix}"
        )
    if not root.is_dir():
        inside = root.parent / MANIFEST_NAME
        where = (
            f"; it is inside the pack {str(root.parent)!r}: pass that directory"
            if inside.is_file()
            else f"; {fix}"
        )
        return (
            f"no pack at {str(root)!r}: it is a file, not a pack directory, so "
            f"{MANIFEST_NAME} is missing{where}"
        )
    packs = _packs_in(root)
    held = f" It holds the packs {_named(packs)}: pass one of them." if packs else ""
    return (
        f"no pack at {str(root)!r}: {MANIFEST_NAME} is missing. A pack is complete only once "
        f"its manifest exists (an interrupted pack has none); {fix}.{held}"
    )


def check_shard_info(index: int, info: ShardInfo, where: str = "manifest") -> None:
    """Check the types and ranges of one shard entry of a manifest.

    Raises:
        PackFormatError: naming the shard and the bad key.
    """

    def bad(key: str, expected: str) -> PackFormatError:
        value = getattr(info, key)
        return PackFormatError(
            f"shard {index} of {where}: {key!r} must be {expected}, got {value!r}; "
            "the manifest was modified, re-create the pack"
        )

    if not isinstance(info.file, str) or not info.file:
        raise bad("file", "a non-empty file name")
    for key in ("samples", "bytes"):
        value = getattr(info, key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise bad(key, "a non-negative integer")
    if not isinstance(info.sha256, str) or len(info.sha256) != 64:
        raise bad("sha256", "a hex SHA-256 digest (64 characters)")


def shard_path(pack_dir: str | os.PathLike[str], file: str) -> Path:
    """The real path of a manifest's shard ``file``, which must lie inside the pack.

    ``file`` must be relative (no drive, no leading ``/`` or ``\\``), must not contain
    ``..``, and, after following symbolic links, must lead to a path inside the pack
    directory (itself resolved). A link to another file of the pack is fine.

    Raises:
        PackFormatError: naming the file and why it is refused.
    """
    root = Path(pack_dir)
    fix = "a manifest may only name files inside its pack; re-create the pack"
    if os.path.isabs(file) or file.startswith(("/", "\\")) or (len(file) > 1 and file[1] == ":"):
        raise PackFormatError(
            f"shard file {file!r} in pack {str(root)!r} is an absolute path; shard files "
            f"must lie inside the pack ({fix})"
        )
    if ".." in file.replace("\\", "/").split("/"):
        raise PackFormatError(
            f"shard file {file!r} in pack {str(root)!r} contains '..' and would lead "
            f"outside the pack ({fix})"
        )
    try:
        base = root.resolve()
        full = (root / file).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before 3.13)
        raise PackFormatError(
            f"shard file {file!r} in pack {str(root)!r} cannot be resolved: {exc}"
        ) from None
    if not full.is_relative_to(base) or full == base:
        raise PackFormatError(
            f"shard file {file!r} in pack {str(root)!r} is a link that leads outside the "
            f"pack, to {str(full)!r} ({fix})"
        )
    return full


def file_sha256(path: str | os.PathLike[str], block: int = 1 << 22) -> str:
    """SHA-256 hex digest of a whole file, read in 4 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def write_atomic_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically and durably.

    The pack writer's name for :func:`scramjet.runtime.files.atomic_write_text`.
    """
    # Imported here: ``scramjet.runtime`` imports torch, which pack workers never need.
    from scramjet.runtime.files import atomic_write_text

    atomic_write_text(path, text)


def fsync_dir(path: Path) -> None:
    """fsync a directory so renames inside it survive a crash (no-op where unsupported).

    :func:`scramjet.runtime.files.fsync_dir`, minus its errors on file systems that
    cannot open or fsync a directory.
    """
    from scramjet.runtime.files import fsync_dir as fsync_directory  # see write_atomic_text

    with contextlib.suppress(OSError):
        fsync_directory(path)
