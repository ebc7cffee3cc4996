"""Reading the CSV list of a pack: header, dtypes, safe paths and typed values."""

from __future__ import annotations

import csv
import errno
import functools
import io
import os
import re
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from scramjet.data.format import parse_dtype, parse_scalar, split_list


class RowError(ValueError):
    """One CSV row cannot be packed; the message names the row and the file."""

    def __init__(self, line: int, file: str, reason: str) -> None:
        super().__init__(f"{reason} (CSV row at line {line}, file {file!r})")
        self.line = line
        self.file = file
        self.reason = reason


def printable(text: str) -> str:
    """``text`` with bytes that were not UTF-8 shown as ``\\xNN`` (for messages, reports)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _not_utf8(text: str) -> bool:
    """Whether ``text`` holds bytes that did not decode (read with ``surrogateescape``)."""
    return any("\udc80" <= ch <= "\udcff" for ch in text)


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
    The file is UTF-8; bytes that are not UTF-8 are kept (as ``surrogateescape``), so a
    row holding them becomes a bad row in :func:`parse_row` rather than failing the file.

    Raises:
        ValueError: when its header is not UTF-8.

    Returns:
        The header names and ``(line number, cells)`` for every non-empty row: no names
        and no rows for an empty file (see :func:`no_rows_message`).
    """
    path = Path(file_list)
    if path.is_dir():
        raise IsADirectoryError(
            f"file_list {str(path)!r} is a directory, not a CSV list; pass the list file "
            f"itself (e.g. {str(path / 'list.csv')!r}), and the folder as file_dir"
        )
    if not path.is_file():
        raise FileNotFoundError(f"file_list {str(path)!r} does not exist; pass the CSV list path")
    text = path.read_bytes().decode("utf-8-sig", "surrogateescape")
    lines = text.splitlines()
    if not lines:
        return [], []
    if _not_utf8(lines[0]):
        raise ValueError(
            f"the header of file_list {str(path)!r} is not valid UTF-8 "
            f"({printable(lines[0])!r}); save the CSV list as UTF-8"
        )
    delimiter = "\t" if "\t" in lines[0] else ","
    # newline="": lines may end in \n, \r\n or \r alone (old Mac / Excel for Mac lists),
    # and line breaks inside quoted cells are kept as written. strict: a quote that is
    # never closed would otherwise swallow every later row into one cell, silently.
    reader = csv.reader(
        io.StringIO(text, newline=""), delimiter=delimiter, quotechar='"', strict=True
    )
    records: list[tuple[int, list[str]]] = []
    while True:
        start = reader.line_num + 1
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise ValueError(_quoting_error(path, start, delimiter, exc)) from None
        records.append((reader.line_num, cells))
    header = [h.strip() for h in records[0][1]]
    rows = [(line, cells) for line, cells in records[1:] if any(c.strip() for c in cells)]
    return header, rows


def no_rows_message(file_list: object, header: list[str]) -> str:
    """Why a list with no rows cannot be packed: empty, blank lines, or a header alone."""
    path = Path(str(file_list))
    if any(header):
        what = f"has a header line ({', '.join(header)}) but no rows"
    elif path.stat().st_size == 0:
        what = "is empty (0 bytes), so it has no rows"
    else:
        what = "holds only blank lines, so it has no rows"
    return (
        f"file_list {str(path)!r} {what}. A list is a header line naming the image column, "
        "then the value columns, and one row per image below it: its path (relative to "
        "file_dir), then its values, e.g. 'image,label' then 'cats/001.jpg,3'. Add the "
        "rows, or check that this is the list you meant"
    )


def _quoting_error(path: Path, line: int, delimiter: str, exc: csv.Error) -> str:
    """The message for a list whose quotes cannot be read: where, what, and how to fix."""
    sep = "a tab" if delimiter == "\t" else "a comma"
    if "end of data" in str(exc):
        what = (
            f"a quoted cell opened on line {line} is never closed, so every line after it "
            "would be read as one cell"
        )
    else:
        what = (
            f"a quoted cell on line {line} goes on after its closing quote ({exc}); a cell "
            "that starts with a quote is read as a quoted cell up to the next quote"
        )
    return (
        f"file_list {str(path)!r} cannot be read: {what}. Close each quoted cell before "
        f"{sep} or the line end, and write a quote inside a quoted cell as two quotes: "
        '"""Hello,"" she said" is the text "Hello," she said'
    )


def dtype_list(dtype: Any) -> list[str]:
    """``dtype`` as given to :func:`~scramjet.data.pack` or ``scramjet pack --dtype``: a
    list (or tuple) of dtypes, or one string of comma-separated dtypes (``"int64,str"``;
    spaces around the commas are ignored). Entries of a list may hold commas too.

    Raises:
        TypeError: ``dtype`` is neither a string nor a sequence of strings.
    """
    parts = [dtype] if isinstance(dtype, str) else dtype
    if not isinstance(parts, list | tuple) or not all(isinstance(d, str) for d in parts):
        raise TypeError(
            f"dtype must be a list of dtype names or one comma-separated string; received "
            f"{type(dtype).__name__} {dtype!r}. Pass e.g. dtype=['int64', 'str'] or "
            "dtype='int64,str'"
        )
    if not "".join(parts).strip():
        return []
    return [d.strip() for part in parts for d in part.split(",")]


def check_header_is_not_a_row(header: list[str], root: Path, file_list: object) -> None:
    """A list without a header line would lose its first row silently (taken as the
    header): refuse a header whose first cell is a file in ``root``. The advice keeps the
    list's own separator (a tab-separated list given a comma header is read with commas)."""
    first = header[0] if header else ""
    if first and (root / first).is_file():
        with open(Path(str(file_list)), encoding="utf-8-sig", errors="replace") as f:
            tabbed = "\t" in f.readline()
        sep, sep_name = ("\t", "a tab") if tabbed else (",", "a comma")
        values = ["label"] if len(header) <= 2 else [f"label{i}" for i in range(1, len(header))]
        example = sep.join(["image", *values])
        raise ValueError(
            f"the first line of file_list {str(file_list)!r} ({sep.join(header)!r}) looks "
            f"like a row, not a header: {first!r} is a file in {str(root)!r}, and the first "
            f"line is read as the column names, so that image would be left out. Add a "
            f"header line first, its names separated by {sep_name} like the rows, "
            f"e.g. {example!r}."
        )


def _bad_name(header: list[str]) -> str:
    """What is wrong with the first bad column name of ``header`` and how to fix it."""
    for i, name in enumerate(header, 1):
        if not name:
            return f"column {i} has no name; give it one in the header line"
        if name.startswith("_"):
            return (
                f"{name!r} (column {i}) starts with '_', which the pack keeps for its own "
                f"data; rename it, e.g. {name.lstrip('_') or 'value'!r}"
            )
        places = [j for j, other in enumerate(header, 1) if other == name]
        if len(places) > 1:
            where = ", ".join(map(str, places[:-1])) + f" and {places[-1]}"
            return (
                f"{name!r} is the name of columns {where}; rename all but one, e.g. {f'{name}_2'!r}"
            )
    return ""


def check_header(header: list[str], dtype: list[str]) -> list[tuple[str, bool]]:
    """Validate column names against ``dtype`` and return parsed ``(base, variable)`` pairs."""
    if len(header) < 1 or not header[0]:
        raise ValueError("the CSV header must name at least the image column, e.g. 'image\tlabel'")
    bad = _bad_name(header)
    if bad:
        raise ValueError(
            f"CSV header names must be unique, non-empty and not start with '_', got {header}: "
            f"{bad}"
        )
    nested = [h for h in header if "/" in h or h == "."]
    if nested:
        raise ValueError(
            f"CSV header names may not contain '/' or be '.', got {nested} in {header}: each "
            "column is one dataset at the root of every shard, and HDF5 reads '/' as a "
            "group ('a/b' would be 'b' inside 'a'); rename the column, e.g. 'a_b'"
        )
    if len(dtype) != len(header) - 1:
        raise ValueError(
            f"dtype has {len(dtype)} entries (received {dtype}) but the CSV has "
            f"{len(header) - 1} value columns {header[1:]}; give one dtype per column after "
            "the first, as a list (['int64', 'str']) or a comma-separated string ('int64,str')"
            + _separator_hint(header)
        )
    return [parse_dtype(d) for d in dtype]


def _separator_hint(header: list[str]) -> str:
    """For a header read as one column: how it was read, and what separates columns."""
    if len(header) != 1 or not any(sep in header[0] for sep in ";| "):
        return ""
    return (
        f". The header line was read as the one column {header[0]!r}: columns are split at "
        "tabs (when the header line holds one) or at commas; save the list as CSV or TSV"
    )


def safe_path(root: Path, name: str, line: int, dirs: dict[str, str] | None = None) -> str:
    """Resolve ``name`` under ``root``; reject absolute paths and paths that escape it.

    A name that is not UTF-8, holds a NUL byte, is too long for the file system or
    runs into a symbolic-link loop is a :class:`RowError` like a missing file.

    ``dirs``, shared by the calls of one pack, remembers the real path of each folder the
    names are in, so a name costs one ``lstat`` instead of one per path component.
    """
    if not name.strip():
        raise RowError(line, name, "empty file name")
    if _not_utf8(name):
        raise RowError(
            line, printable(name), "file name is not valid UTF-8; save the CSV list as UTF-8"
        )
    if "\x00" in name:
        raise RowError(line, name, "file name contains a NUL byte")
    if os.path.isabs(name) or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise RowError(
            line, name, "absolute paths are not allowed; list paths relative to file_dir"
        )
    # os.path rather than pathlib, and each folder resolved once (``dirs``): the pack
    # process runs this for every CSV row before any encoding starts
    base = str(root)
    prefix = base if base.endswith(os.sep) else base + os.sep
    head, tail = os.path.split(name)
    if dirs is not None and tail not in ("", ".", ".."):
        folder = dirs.get(head)
        if folder is None:
            folder = dirs[head] = os.path.realpath(os.path.join(base, head)) if head else base
        full = os.path.join(folder, tail)
        mode = _mode_inside(full, base, prefix, line, name, follow=False)
        if not stat.S_ISLNK(mode):  # a link is followed below, like every other name
            _check_regular(mode, line, name, base)
            return full
    full = os.path.realpath(os.path.join(base, name))  # never raises; a loop stays unresolved
    _check_regular(_mode_inside(full, base, prefix, line, name, follow=True), line, name, base)
    return full


def _check_regular(mode: int, line: int, name: str, base: str) -> None:
    """A RowError unless ``mode`` is a regular file's: a directory or a device is named."""
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        what = "a directory"
    else:
        what = "not a regular file (a device, a socket or a pipe)"
    raise RowError(
        line, name, f"the path is {what} under file_dir {base!r}, not an image file; list files"
    )


def _mode_inside(full: str, base: str, prefix: str, line: int, name: str, follow: bool) -> int:
    """The file mode of ``full`` (``stat`` or, without ``follow``, ``lstat``), after checking
    that it lies under ``base``; a RowError for a path that escapes or cannot be looked up."""
    if not full.startswith(prefix) and full != base:
        raise RowError(line, name, f"path escapes file_dir {base!r}")
    try:
        return (os.stat if follow else os.lstat)(full).st_mode
    except OSError as exc:
        _raise_missing(exc, line, name, base)


def _raise_missing(exc: OSError, line: int, name: str, base: str) -> NoReturn:
    """The RowError for a name whose file cannot be looked up."""
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        raise RowError(
            line, name, f"file not found under file_dir {base!r}{_other_form(base, name)}"
        ) from None
    raise RowError(line, name, _os_reason(exc, name)) from None


def _other_form(base: str, name: str) -> str:
    """For a missing name: a hint when the file exists under the other Unicode form of
    the name (macOS writes accents decomposed, NFD; most lists hold them composed, NFC),
    or under a name that differs only in case (the file ``Cat.PNG`` for ``cat.png``)."""
    for form in ("NFC", "NFD"):
        other = unicodedata.normalize(form, name)
        if other != name and os.path.isfile(os.path.join(base, other)):
            return (
                f"; a file of the same name with its accents written as {form} exists "
                f"({other!a}, the list has {name!a}): write the names of the list "
                f"in the same form, unicodedata.normalize({form!r}, name)"
            )
    folder, _, leaf = name.rpartition("/")
    try:
        here = os.path.join(base, folder)
        found = _names_by_case(here, os.stat(here).st_mtime_ns).get(leaf.casefold())
    except OSError:
        return ""
    if found is None or found == leaf:  # the same name: a broken link, not a case mismatch
        return ""
    other = f"{folder}/{found}" if folder else found
    return (
        f"; {other!r} exists, a name that differs only in upper/lower case (a list written "
        "on macOS or Windows, whose file systems ignore case): write the name as the file has it"
    )


@functools.lru_cache(maxsize=8)
def _names_by_case(folder: str, mtime_ns: int) -> dict[str, str]:
    """The files of ``folder`` by case-folded name (read again when the folder changes)."""
    with os.scandir(folder) as entries:
        return {e.name.casefold(): e.name for e in entries}


def _os_reason(exc: OSError, name: str) -> str:
    if exc.errno == errno.ELOOP:
        return "symbolic link loop"
    if exc.errno == errno.ENAMETOOLONG:
        longest = max(len(part.encode("utf-8", "surrogateescape")) for part in name.split("/"))
        return (
            f"file name too long for the file system ({len(name)} characters, longest part "
            f"{longest} bytes)"
        )
    return f"cannot access the file ({exc.strerror or exc})"


def parse_value(cell: str, base: str, variable: bool) -> Any:
    """Parse one value cell according to its column dtype."""
    if base == "str":
        return cell
    if variable:
        try:
            return [parse_scalar(tok, base) for tok in split_list(cell)]
        except ValueError as exc:
            if not cell.strip().startswith(("[", "(")):
                raise
            raise ValueError(
                f"{exc}; the list cell {cell!r} has brackets: write its values without them, "
                "separated by commas or spaces ('1,2,3'). pandas writes a list as "
                "'[1, 2, 3]': join each list first, e.g. df[col].map(lambda v: "
                "','.join(map(str, v)))"
            ) from None
    tokens = split_list(cell)
    if not tokens:
        missing = " (nan for a missing value)" if base.startswith("float") else ""
        raise ValueError(
            f"expected one {base} value, got an empty cell ({cell!r}): fill it in{missing}, "
            f"or use the dtype 'v{base}', whose rows may be empty lists"
        )
    if len(tokens) != 1:
        comma = re.fullmatch(r"\s*([-+]?\d+),(\d+)\s*", cell)
        decimal = (
            f" (a decimal comma? write {comma[1]}.{comma[2]}: '.' is the decimal mark here)"
            if comma and base.startswith("float")
            else ""
        )
        raise ValueError(
            f"expected one {base} value, got {cell!r}; use the dtype 'v{base}' for lists" + decimal
        )
    return parse_scalar(tokens[0], base)


def parse_row(
    root: Path,
    header: list[str],
    dtypes: list[tuple[str, bool]],
    line: int,
    cells: list[str],
    is_seq: bool,
    dirs: dict[str, str] | None = None,
) -> Row:
    """Turn raw CSV cells into a :class:`Row`, checking paths and values.

    Raises:
        RowError: naming the row's line and file.
    """
    first = cells[0].strip() if cells else ""
    if any(_not_utf8(cell) for cell in cells[1:]):
        raise RowError(line, printable(first), "a value is not valid UTF-8; save the CSV as UTF-8")
    if len(cells) > len(header):
        raise RowError(line, first, f"{len(cells)} cells but the header has {len(header)}")
    if len(cells) < len(header):
        missing = header[len(cells) :]
        raise RowError(
            line,
            first,
            f"{len(cells)} cells but the header has {len(header)} (no cell for {missing}); "
            "give every column a cell, an empty one as nothing between two separators",
        )
    names = [n.strip() for n in first.split(",") if n.strip()] if is_seq else [first]
    if not names:
        raise RowError(line, first, "no frame names in this sequence row")
    files = [safe_path(root, n, line, dirs) for n in names]
    values = []
    for (base, variable), col, cell in zip(dtypes, header[1:], cells[1:]):
        try:
            values.append(parse_value(cell, base, variable))
        except ValueError as exc:
            raise RowError(line, first, f"column {col!r}: {exc}") from None
    return Row(line=line, name=first, files=files, values=values)
