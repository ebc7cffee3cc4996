"""How checkpoint payloads are built from live objects, checked, and turned back into values.

Everything stored goes through :func:`to_storable` (in ``_storable``), which rebuilds
every value from the types that ``torch.load(weights_only=True)`` reads back, so no file
is written that the loader refuses. The file layer lives here too: the checksum, :func:`write_checked` (which turns a failed
write into an error naming the file and, for a full disk, the free space), the layout
check, the checkpoint errors, and the matching of saved module state to a module.

File layout (format 2)::

    <torch.save zip of the payload dict> <trailer: 71 ASCII bytes>
    trailer = b"\nscramjet-checksum 1 " + <16 hex: length of the zip> + b" "
              + <32 hex: checksum of the zip> + b"\n"

Zip readers find their directory from the end of the file and skip bytes after it, so
``torch.load(weights_only=True)`` reads these files as they are. The checksum is
BLAKE2b-128 over the length and the list of 64-bit sums (mod 2**64, little-endian words)
of every 4 KiB block (the last one padded with zeros): numpy sums blocks at memory speed
(several GB/s, 3 to 4 times ``zlib.crc32`` here), and BLAKE2b over the short list of sums
keeps their order. Every single-bit flip, every change confined to one 64-bit word,
any truncation, extension or reordering of blocks is detected for certain; other random
damage to a block goes unnoticed with a probability of 2**-64. It detects corruption, not
tampering: the loader is already ``weights_only``. :class:`ChecksumWriter` computes it
while the file is written, :func:`verify_file` when it is read. Format 1 files (no
trailer) still load, unchecked.
"""

from __future__ import annotations

import errno
import hashlib
import mmap
import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch
from torch import nn

from scramjet.checkpoint._storable import from_storable, to_storable
from scramjet.checkpoint._values import check_count, clean_metrics
from scramjet.checkpoint._values import short as _short
from scramjet.runtime.files import atomic_write

FORMAT_VERSION = 2
MARKER = "scramjet_checkpoint"
TRAILER_MAGIC = b"\nscramjet-checksum 1 "
TRAILER_SIZE = len(TRAILER_MAGIC) + 16 + 1 + 32 + 1
_BLOCK = 4096  # bytes per summed block: a page, the unit in which storage tends to fail
_WORDS = _BLOCK // 8
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
_MAX_LISTED_KEYS = 20

__all__ = [
    "DISK_FULL",
    "FORMAT_VERSION",
    "MARKER",
    "TRAILER_SIZE",
    "ChecksumMismatch",
    "ChecksumWriter",
    "build_payload",
    "check_count",
    "check_layout",
    "clean_metrics",
    "from_storable",
    "is_stateful",
    "to_storable",
    "unwrap",
    "verify_file",
    "write_checkpoint",
]


def unwrap(obj: Any) -> Any:
    """Strip DDP/DataParallel (``.module``) and ``torch.compile`` (``._orig_mod``) wrappers."""
    while True:
        if isinstance(obj, nn.parallel.DistributedDataParallel | nn.DataParallel):
            obj = obj.module
        elif isinstance(obj, nn.Module) and isinstance(getattr(obj, "_orig_mod", None), nn.Module):
            obj = obj._orig_mod
        else:
            return obj


def is_stateful(obj: Any) -> bool:
    return callable(getattr(obj, "state_dict", None)) and callable(
        getattr(obj, "load_state_dict", None)
    )


def build_payload(
    state: Mapping[str, Any],
    *,
    seq: int,
    step: int,
    epoch: int | None,
    metrics: Mapping[str, Any] | None,
    classes: bool = False,
) -> dict[str, Any]:
    """The dict stored in a checkpoint file (objects with ``state_dict`` saved through it).

    With ``classes``, ``"classes"`` records the class name of each entry saved through
    ``state_dict()``, so a load can refuse a scheduler of another class.
    """
    if not isinstance(state, Mapping):
        raise TypeError(f"state must be a dict of entries, got {type(state).__qualname__}")
    step = check_count(step, "step")
    if epoch is not None:
        epoch = check_count(epoch, "epoch", optional=True)
    payload_state: dict[str, Any] = {}
    kinds: dict[str, str] = {}
    for key, value in state.items():
        if not isinstance(key, str):
            raise TypeError(f"state keys must be strings, got {key!r}")
        key = str.__str__(key)  # a StrEnum member: its plain value (the loader refuses it)
        obj = unwrap(value)
        if is_stateful(obj):
            payload_state[key] = to_storable(obj.state_dict(), f"state[{key!r}].state_dict()")
            kinds[key] = type(obj).__qualname__
        else:
            payload_state[key] = to_storable(value, f"state[{key!r}]")
    payload = {
        MARKER: FORMAT_VERSION,
        "seq": seq,
        "step": step,
        "epoch": epoch,
        "metrics": clean_metrics(metrics),
        "stateful": list(kinds),
        "state": payload_state,
    }
    return payload | ({"classes": kinds} if classes and kinds else {})


# --------------------------------------------------------------------------- layout


def check_layout(payload: Any, checked: bool) -> str | None:
    """What is wrong with a loaded payload (None if it is a well-formed checkpoint).

    Args:
        payload: What ``torch.load`` returned.
        checked: Whether the file had a valid checksum trailer. A format 2 file without
            one lost its trailer (damaged or truncated), which is an error too.
    """
    if not isinstance(payload, dict) or MARKER not in payload:
        if isinstance(payload, dict) and "model_state_dict" in payload:  # pytorch-accelerated's
            return (
                "not a scramjet checkpoint: it holds 'model_state_dict' but no training "
                "state (a pytorch-accelerated save_checkpoint file, say), so a run cannot "
                "resume from it; load its weights with trainer.load_checkpoint(path) from "
                "scramjet.compat.pytorch_accelerated, or model.load_state_dict(...)"
            )
        return "not a scramjet checkpoint (expected a file written by CheckpointManager.save)"
    version = payload[MARKER]
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        return f"malformed checkpoint: format marker {version!r} is not a version number"
    if version > FORMAT_VERSION:
        return (
            f"written by a newer scramjet (format {version}, this one reads up to "
            f"{FORMAT_VERSION}); upgrade scramjet"
        )
    if version >= 2 and not checked:
        return "its checksum trailer is missing or damaged (truncated or corrupted file)"
    return _malformed_field(payload)


def _malformed_field(payload: dict[Any, Any]) -> str | None:
    def is_int(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    for key in ("step", "state"):
        if key not in payload:
            return f"malformed checkpoint: {key!r} is missing"
    problems = {
        "step": is_int(payload["step"]) and payload["step"] >= 0,
        "state": isinstance(payload["state"], dict)
        and all(isinstance(k, str) for k in payload["state"]),
        "seq": is_int(payload.get("seq", 0)),
        "epoch": payload.get("epoch") is None or is_int(payload.get("epoch")),
        "metrics": isinstance(payload.get("metrics", {}), dict)
        and all(
            isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool)
            for k, v in payload.get("metrics", {}).items()
        ),
        "stateful": isinstance(payload.get("stateful", []), list)
        and all(isinstance(k, str) for k in payload.get("stateful", [])),
    }
    expected = {
        "step": "an int >= 0",
        "state": "a dict with str keys",
        "seq": "an int",
        "epoch": "an int or None",
        "metrics": "a dict of str to numbers",
        "stateful": "a list of str",
    }
    for key, fine in problems.items():
        if not fine:
            value = payload[key]
            return (
                f"malformed checkpoint: {key!r} is a {type(value).__qualname__} "
                f"({_short(value)}), expected {expected[key]}"
            )
    return None


# --------------------------------------------------------------------------- checksum


class ChecksumMismatch(ValueError):
    """A file's checksum trailer does not match its content (the message says how)."""


def _block_sums(view: memoryview) -> np.ndarray[Any, np.dtype[np.uint64]]:
    """64-bit sums of the little-endian words of each whole 4 KiB block of ``view``."""
    words = np.frombuffer(view, dtype="<u8", count=len(view) // 8)
    sums: np.ndarray[Any, np.dtype[np.uint64]] = words.reshape(-1, _WORDS).sum(
        axis=1, dtype=np.uint64
    )
    return sums


def _digest(length: int, sums: list[np.ndarray[Any, np.dtype[np.uint64]]], tail: bytes) -> str:
    if tail:  # the last, partial block, padded with zeros
        sums = [*sums, _block_sums(memoryview(tail.ljust(_BLOCK, b"\0")))]
    hasher = hashlib.blake2b(length.to_bytes(8, "little"), digest_size=16)
    for part in sums:
        hasher.update(part.astype("<u8", copy=False).tobytes())
    return hasher.hexdigest()


def _trailer(length: int, digest: str) -> bytes:
    return TRAILER_MAGIC + f"{length:016x} {digest}\n".encode("ascii")


def _parse_trailer(tail: bytes) -> tuple[int, str] | None:
    if len(tail) != TRAILER_SIZE or not tail.startswith(TRAILER_MAGIC) or tail[-1:] != b"\n":
        return None
    fields = tail[len(TRAILER_MAGIC) : -1].split(b" ")
    hexdigits = set(b"0123456789abcdef")
    if len(fields) != 2 or len(fields[0]) != 16 or len(fields[1]) != 32:
        return None
    if not all(c in hexdigits for c in fields[0] + fields[1]):
        return None
    return int(fields[0], 16), fields[1].decode("ascii")


class ChecksumWriter:
    """Binary file wrapper that checksums what passes through it, for one checkpoint file.

    ``torch.save`` writes into it; :meth:`finish` then appends the trailer. The sums
    are taken from the bytes as they are written (no second read of the file), and an
    ``OSError`` of the underlying file is kept in :attr:`error`: torch reports a failed
    write as a position mismatch, so the original cause would be lost otherwise.
    """

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self._sums: list[np.ndarray[Any, np.dtype[np.uint64]]] = []
        self._partial = bytearray()
        self.length = 0
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        view = memoryview(data)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        try:
            written = self._file.write(view)
        except OSError as error:
            self.error = self.error or error
            raise
        self._add(view[:written] if written is not None else view)
        return len(view) if written is None else written

    def _add(self, view: memoryview) -> None:
        self.length += len(view)
        if self._partial:
            take = min(_BLOCK - len(self._partial), len(view))
            self._partial += view[:take]
            view = view[take:]
            if len(self._partial) < _BLOCK:
                return
            self._sums.append(_block_sums(memoryview(self._partial)))
            self._partial.clear()
        whole = len(view) - len(view) % _BLOCK
        if whole:
            self._sums.append(_block_sums(view[:whole]))
        self._partial += view[whole:]

    def flush(self) -> None:
        try:
            self._file.flush()
        except OSError as error:
            self.error = self.error or error
            raise

    def finish(self) -> None:
        """Append the trailer (after the last write of the payload)."""
        trailer = _trailer(self.length, _digest(self.length, self._sums, bytes(self._partial)))
        try:
            self._file.write(trailer)
        except OSError as error:
            self.error = self.error or error
            raise


def verify_file(path: str | os.PathLike[str]) -> bool:
    """Check a checkpoint file against its checksum trailer.

    Returns:
        True if the file has a trailer and matches it; False if it has no trailer (a
        format 1 file, or a format 2 file whose trailer was damaged: the caller tells them
        apart from the payload's format marker).

    Raises:
        ChecksumMismatch: The content or its length differs from what was written.
        OSError: The file cannot be read.
    """
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size < TRAILER_SIZE:
            return False
        file.seek(size - TRAILER_SIZE)
        parsed = _parse_trailer(file.read(TRAILER_SIZE))
        if parsed is None:
            return False
        length, expected = parsed
        if length != size - TRAILER_SIZE:
            raise ChecksumMismatch(
                f"the file holds {size - TRAILER_SIZE} bytes before its checksum trailer, "
                f"the trailer says {length} (truncated, extended or damaged)"
            )
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            if hasattr(mapped, "madvise"):
                mapped.madvise(mmap.MADV_SEQUENTIAL)
            actual = _digest_of_mapping(mapped, length)
    if actual != expected:
        raise ChecksumMismatch(
            f"checksum mismatch (stored {expected}, computed {actual}): the file was "
            "changed or damaged after it was written"
        )
    return True


def _digest_of_mapping(mapped: mmap.mmap, length: int) -> str:
    # The views are released when this returns, before the caller closes the mapping.
    whole = length - length % _BLOCK
    view = memoryview(mapped)
    try:
        sums = [_block_sums(view[:whole])] if whole else []
        return _digest(length, sums, bytes(view[whole:length]))
    finally:
        view.release()


# --------------------------------------------------------------------------- errors


class CheckpointError(RuntimeError):
    """Base class of the errors raised while reading or writing checkpoints."""


class CorruptCheckpointError(CheckpointError):
    """A checkpoint file cannot be read (truncated, damaged, or not a scramjet checkpoint)."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        super().__init__(f"checkpoint {str(path)!r} cannot be read: {reason}")


class CheckpointMismatchError(CheckpointError, ValueError):
    """The checkpoint does not fit the objects it is loaded into (``strict=True``)."""


class CheckpointWriteError(CheckpointError):
    """Writing a checkpoint failed (raised by ``save()``, or by the next call after a
    background write).

    The message says what happened. Usually the checkpoint was not written
    (``saved`` is False): no file exists for it and no earlier checkpoint was deleted.
    When the file was written but a later step failed (``index.json`` did not fit on the
    disk, ``on_saved`` raised), ``saved`` is True and the checkpoint loads normally.
    ``__cause__`` holds the original error (``OSError`` for a full disk, ...).

    Attributes:
        path: The checkpoint file concerned (None if unknown).
        saved: Whether that file was written completely and is loadable.
    """

    def __init__(self, message: str, path: Path | None = None, saved: bool = False) -> None:
        super().__init__(message)
        self.path = path
        self.saved = saved


def _bytes(n: int) -> str:
    if n < 1000:
        return f"{n} bytes"
    size = float(n)
    for unit in ("KB", "MB", "GB", "TB"):
        size /= 1000
        if size < 1000 or unit == "TB":
            break
    return f"{size:.1f} {unit}"


def disk_full(error: BaseException, sink: ChecksumWriter | None) -> OSError | None:
    """The ``OSError`` behind a failed write, if it says the disk (or quota) is full."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in DISK_FULL:
            return seen
        seen = seen.__cause__ or seen.__context__
    if sink is not None and sink.error is not None and sink.error.errno in DISK_FULL:
        return sink.error
    return None


def free_space(directory: Path) -> str:
    try:
        usage = shutil.disk_usage(directory)
    except OSError:
        return f"free space in {str(directory)!r} unknown"
    return f"{_bytes(usage.free)} free of {_bytes(usage.total)} in {str(directory)!r}"


def _write_failure(path: Path, error: Exception, sink: ChecksumWriter | None) -> Exception:
    """The error to raise for a checkpoint file that could not be written."""
    full = disk_full(error, sink)
    if full is not None:
        return CheckpointWriteError(
            f"checkpoint {str(path)!r} was not saved: the disk is full ({full.strerror}); "
            f"{free_space(path.parent)}. The earlier checkpoints are intact. Free some space, "
            "lower keep_last, or save to another disk.",
            path,
        )
    cause = sink.error if sink is not None and sink.error is not None else error
    if not isinstance(cause, OSError):
        return error  # not an I/O failure (e.g. a bug in a state_dict): raised as it is
    if not path.parent.is_dir():
        return CheckpointWriteError(
            f"checkpoint {str(path)!r} was not saved: its folder {str(path.parent)!r} was "
            f"removed while it was written ({type(cause).__name__}: {cause}), with the "
            "earlier checkpoints in it. Keep the folder while the run saves into it; the "
            "next save creates it again.",
            path,
        )
    return CheckpointWriteError(
        f"checkpoint {str(path)!r} was not saved: {type(cause).__name__}: {cause}. The "
        f"earlier checkpoints in {str(path.parent)!r} are intact. Fix the cause (disk "
        "space, permissions) and save again.",
        path,
    )


def write_checked(path: Path, write: Callable[[Any], object], *, fsync: bool) -> None:
    """Write one checkpoint file with its checksum trailer, atomically; clear errors."""
    sinks: list[ChecksumWriter] = []

    def checked(file: Any) -> None:
        sinks.append(ChecksumWriter(file))
        write(sinks[0])
        sinks[0].finish()

    try:
        atomic_write(path, checked, fsync=fsync)
    except Exception as error:
        failure = _write_failure(path, error, sinks[0] if sinks else None)
        if failure is error:
            raise
        raise failure from (sinks[0].error if sinks and sinks[0].error else error)


# --------------------------------------------------------------------------- module state


def format_keys(keys: list[str]) -> str:
    shown = ", ".join(keys[:_MAX_LISTED_KEYS])
    more = len(keys) - _MAX_LISTED_KEYS
    return shown + (f", ... ({more} more)" if more > 0 else "")


_WRAPPER_PREFIXES = ("module.", "_orig_mod.")  # DDP/DataParallel, torch.compile


def _without_wrapper_prefix(saved: Mapping[str, Any], own: Mapping[str, Any]) -> Mapping[str, Any]:
    """``saved`` keyed for the plain module when it is the state dict of a wrapped one
    (every key starts with ``module.`` or ``_orig_mod.``, none fits as it is)."""
    if not saved or any(key in own for key in saved):
        return saved
    stripped = dict(saved)
    while True:
        prefix = next(
            (p for p in _WRAPPER_PREFIXES if all(k.startswith(p) for k in stripped)), None
        )
        if prefix is None:
            break
        stripped = {key[len(prefix) :]: value for key, value in stripped.items()}
    return stripped if any(key in own for key in stripped) else saved


def match_module_state(
    module: nn.Module, saved: Mapping[str, Any], scope: str | None
) -> tuple[dict[str, Any], list[str], list[str], list[str]]:
    """Pick the saved entries that fit ``module``; report missing/unexpected/mismatched keys."""
    own = module.state_dict()
    saved = _without_wrapper_prefix(saved, own)
    if scope:
        prefix = scope.rstrip(".") + "."
        own = {k: v for k, v in own.items() if k.startswith(prefix)}
        saved = {k: v for k, v in saved.items() if k.startswith(prefix)}
    usable: dict[str, Any] = {}
    mismatched: list[str] = []
    for key, value in saved.items():
        if key not in own:
            continue
        target = own[key]
        tensors = isinstance(value, torch.Tensor) and isinstance(target, torch.Tensor)
        if tensors and value.shape != target.shape:
            mismatched.append(f"{key}: {tuple(value.shape)} -> {tuple(target.shape)}")
            continue
        usable[key] = value
    missing = [k for k in own if k not in saved]
    unexpected = [k for k in saved if k not in own]
    return usable, missing, unexpected, mismatched


_FIT_ADVICE = (
    "Load the checkpoint into the model it was saved from, or pass strict=False to load the "
    "matching keys only (or scope='prefix' for one submodule)."
)


def load_module_state(
    name: str,
    module: nn.Module,
    saved: Any,
    scope: str | None,
    strict: bool,
    path: Path,
    *,
    target: str | None = None,
    advice: str = _FIT_ADVICE,
    check_only: bool = False,
) -> tuple[list[str], list[str], list[str]]:
    """Load checkpoint entry ``name`` (of the file ``path``) into ``module``.

    Returns the keys skipped (missing, unexpected, shape-mismatched); with ``strict`` any
    of them is a :class:`CheckpointMismatchError` that lists them and ``advice`` (the ways
    out, in the caller's words); ``target`` names what did not fit (default: the entry).
    ``check_only`` raises or returns the same without loading anything.
    """
    if not isinstance(saved, Mapping):
        raise CheckpointMismatchError(
            f"entry {name!r} of {str(path)!r} holds a {type(saved).__qualname__}, "
            "not a module state dict"
        )
    usable, missing, unexpected, mismatched = match_module_state(module, saved, scope)
    if scope and not usable and not mismatched:
        prefixes = sorted({k.split(".", 1)[0] for k in saved})
        raise CheckpointMismatchError(
            f"entry {name!r} of {str(path)!r} has no keys under scope {scope!r}; "
            f"top-level prefixes in the checkpoint: {format_keys(prefixes)}"
        )
    if strict and (missing or unexpected or mismatched):
        lines = [f"checkpoint {str(path)!r} does not fit {target or f'entry {name!r}'}:"]
        for label, keys in (
            ("missing keys", missing),
            ("unexpected keys", unexpected),
            ("shape mismatches", mismatched),
        ):
            if keys:
                lines.append(f"  {label} ({len(keys)}): {format_keys(keys)}")
        lines.append(f"  {advice}")
        raise CheckpointMismatchError("\n".join(lines))
    if not check_only:
        module.load_state_dict(usable, strict=False)
    return missing, unexpected, mismatched


def describe_skipped(result: Any) -> str:
    """The warning for a ``LoadResult`` that skipped keys (``strict=False``)."""
    parts = [f"loaded {str(result.path)!r} with strict=False; skipped keys:"]
    for label, report in (
        ("missing", result.missing_keys),
        ("unexpected", result.unexpected_keys),
        ("shape mismatch", result.mismatched_keys),
    ):
        for name, keys in report.items():
            parts.append(f"  {name} {label} ({len(keys)}): {format_keys(keys)}")
    return "\n".join(parts)


def write_checkpoint(
    path: str | os.PathLike[str],
    state: Mapping[str, Any],
    *,
    step: int = 0,
    epoch: int | None = None,
    metrics: Mapping[str, Any] | None = None,
    fsync: bool = True,
    top_level: Iterable[str] = (),
) -> Path:
    """Write one checkpoint file atomically, outside any manager's rotation.

    The file has the same layout as :meth:`CheckpointManager.save` writes, so
    :meth:`CheckpointManager.load` (with ``which=path``) and :func:`read_checkpoint` read it.
    A crash during the write leaves any previous file at ``path`` intact.

    ``top_level`` names entries of ``state`` that are also put at the file's top level (the
    same objects: tensors are stored once), for code that reads ``torch.load(path)[name]``;
    names scramjet's own layout uses (``step``, ``epoch``, ``state``, ...) stay inside only.

    Raises:
        ValueError: ``path`` is a URL (see ``remote.write_remote_checkpoint``).
    """
    if isinstance(path, str) and "://" in path:  # Path() would make it a local folder "s3:"
        raise ValueError(
            f"write_checkpoint writes a local file; received the URL {path!r}. Use "
            "scramjet.checkpoint.remote.write_remote_checkpoint(url, state) (or "
            "trainer.save_checkpoint(url)) to write one checkpoint file to object storage."
        )
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = build_payload(state, seq=0, step=step, epoch=epoch, metrics=metrics, classes=True)
    for name in top_level:
        if name in payload["state"] and name not in payload:
            payload[name] = payload["state"][name]
    write_checked(target, lambda file: torch.save(payload, file), fsync=fsync)
    return target
