"""Reading the CSV list of a pack: header, dtypes, safe paths and typed values."""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scramjet.data.format import parse_dtype, parse_scalar, split_list


class RowError(ValueError):
    """One CSV row cannot be packed; the message names the row and the file."""

    def __init__(self, line: int, file: str, reason: str) -> None:
        super().__init__(f"{reason} (CSV row at line {line}, file {file!r})")
        self.line = line
        self.file = file
        self.reason = reason


@dataclass
class Row:
    """A parsed CSV row: its line number, image file paths and typed values."""

    line: int
    name: str
    files: list[str]
    values: list[Any]


def read_table(file_list: str | os.PathLike[str]) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Read a tab- or comma-separated file list with a header row.

    The separator is a tab when the header line holds one, a comma otherwise; cells may
    be quoted with ``"`` (frame lists of sequences are quoted, comma-joined names).

    Returns:
        The header names and ``(line number, cells)`` for every non-empty row.
    """
    path = Path(file_list)
    if not path.is_file():
        raise FileNotFoundError(f"file_list {str(path)!r} does not exist; pass the CSV list path")
    text = path.read_text(encoding="utf-8-sig")
    lines = text.splitlines()
    if not lines:
        raise ValueError(f"file_list {str(path)!r} is empty; it needs a header row and rows")
    delimiter = "\t" if "\t" in lines[0] else ","
    reader = csv.reader(io.StringIO(text), delimiter=delimiter, quotechar='"')
    header = [h.strip() for h in next(reader)]
    rows = [(reader.line_num, cells) for cells in reader if any(c.strip() for c in cells)]
    return header, rows


def check_header(header: list[str], dtype: list[str]) -> list[tuple[str, bool]]:
    """Validate column names against ``dtype`` and return parsed ``(base, variable)`` pairs."""
    if len(header) < 1 or not header[0]:
        raise ValueError("the CSV header must name at least the image column, e.g. 'image\tlabel'")
    if len(set(header)) != len(header) or any(not h or h.startswith("_") for h in header):
        raise ValueError(
            f"CSV header names must be unique, non-empty and not start with '_', got {header}"
        )
    if len(dtype) != len(header) - 1:
        raise ValueError(
            f"dtype has {len(dtype)} entries but the CSV has {len(header) - 1} value columns "
            f"{header[1:]}; give one dtype per column after the first"
        )
    return [parse_dtype(d) for d in dtype]


def safe_path(root: Path, name: str, line: int) -> str:
    """Resolve ``name`` under ``root``; reject absolute paths and paths that escape it."""
    if not name.strip():
        raise RowError(line, name, "empty file name")
    if os.path.isabs(name) or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise RowError(
            line, name, "absolute paths are not allowed; list paths relative to file_dir"
        )
    full = (root / name).resolve()
    if not full.is_relative_to(root):
        raise RowError(line, name, f"path escapes file_dir {str(root)!r}")
    if not full.is_file():
        raise RowError(line, name, f"file not found under file_dir {str(root)!r}")
    return str(full)


def parse_value(cell: str, base: str, variable: bool) -> Any:
    """Parse one value cell according to its column dtype."""
    if base == "str":
        return cell
    if variable:
        return [parse_scalar(tok, base) for tok in split_list(cell)]
    tokens = split_list(cell)
    if len(tokens) != 1:
        raise ValueError(
            f"expected one {base} value, got {cell!r}; use the dtype 'v{base}' for lists"
        )
    return parse_scalar(tokens[0], base)


def parse_row(
    root: Path,
    header: list[str],
    dtypes: list[tuple[str, bool]],
    line: int,
    cells: list[str],
    is_seq: bool,
) -> Row:
    """Turn raw CSV cells into a :class:`Row`, checking paths and values.

    Raises:
        RowError: naming the row's line and file.
    """
    first = cells[0].strip() if cells else ""
    if len(cells) > len(header):
        raise RowError(line, first, f"{len(cells)} cells but the header has {len(header)}")
    cells = cells + [""] * (len(header) - len(cells))
    names = [n.strip() for n in first.split(",") if n.strip()] if is_seq else [first]
    if not names:
        raise RowError(line, first, "no frame names in this sequence row")
    files = [safe_path(root, n, line) for n in names]
    values = []
    for (base, variable), col, cell in zip(dtypes, header[1:], cells[1:]):
        try:
            values.append(parse_value(cell, base, variable))
        except ValueError as exc:
            raise RowError(line, first, f"column {col!r}: {exc}") from None
    return Row(line=line, name=first, files=files, values=values)
