"""Checkpoint files with pytorch-accelerated's top-level keys that are scramjet checkpoints too.

A file holds scramjet's payload (``state`` with the model, optimizer, scheduler, counters,
history, RNG states: what exact resume needs; checksum trailer) and, at the top level,
the peer's keys: ``model_state_dict``, ``optimizer_state_dict``, ``scheduler_state_dict``
(each the same tensors as the entry under ``state``: stored once) and every
``checkpoint_kwargs`` entry. Code that does ``torch.load(path)["model_state_dict"]`` keeps
working, and ``Trainer.train(resume_from=path)`` resumes from it exactly.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.torch_version import TorchVersion

from scramjet.checkpoint import CheckpointError, CorruptCheckpointError, read_checkpoint
from scramjet.checkpoint._reading import _unreadable_reason
from scramjet.checkpoint.payload import (
    MARKER,
    build_payload,
    from_storable,
    write_checked,
)
from scramjet.checkpoint.records import recorded_classes

#: scramjet's entry names and the peer's top-level names for them.
PEER_KEYS = {
    "model": "model_state_dict",
    "optimizer": "optimizer_state_dict",
    "scheduler": "scheduler_state_dict",
    "scaler": "scaler_state_dict",
}
#: The entry under ``state`` that keeps ``checkpoint_kwargs`` whole.
KWARGS_ENTRY = "checkpoint_kwargs"
# Top-level names of scramjet's own payload: a checkpoint_kwargs entry of the same name is
# kept under ``state`` only (``load_checkpoint`` still returns it).
# "classes" is not among them: a checkpoint_kwargs entry of that name (a classifier's label
# list) is the file's top-level "classes", as in the peer; the class record then gives way
# and a scheduler of another class is judged by its keys, as in files written before it.
_RESERVED = frozenset({MARKER, "seq", "step", "epoch", "metrics", "stateful", "state"})


def write_file(
    path: str | os.PathLike[str],
    state: Mapping[str, Any],
    extras: Mapping[str, Any],
    *,
    step: int,
    epoch: int,
) -> None:
    """Write ``state`` (checkpoint entries) and ``extras`` (plain values) to ``path``."""
    entries = {**state, KWARGS_ENTRY: dict(extras)}
    payload = build_payload(entries, seq=0, step=step, epoch=epoch, metrics=None, classes=True)
    saved = payload["state"]
    for ours, theirs in PEER_KEYS.items():
        if ours in saved:
            payload[theirs] = saved[ours]
    for key, value in saved[KWARGS_ENTRY].items():
        if key not in _RESERVED:
            payload[key] = value
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_checked(target, lambda file: torch.save(payload, file), fsync=True)


def read_file(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """``(peer view, classes)`` of a checkpoint file.

    The peer view has the top-level keys (state dicts and ``checkpoint_kwargs`` entries);
    ``classes`` the peer key of each state dict and the class it was saved from (a
    scheduler of another class is then refused). A file written by pytorch-accelerated
    itself (no scramjet marker) is read as it is, with ``weights_only=True`` (numpy
    scalars, dtypes and numeric arrays allowed), and records no classes.
    """
    try:
        payload = read_checkpoint(path)
    except CorruptCheckpointError as error:
        raw = _read_peer_file(Path(path), error)
        if isinstance(raw, dict) and MARKER not in raw and "model_state_dict" in raw:
            return raw, {}
        raise
    saved: dict[str, Any] = payload["state"]
    ours = _RESERVED | {"classes"}  # the class record: a user's "classes" comes back below
    view = {k: from_storable(v) for k, v in payload.items() if k not in ours}
    view.update(from_storable(saved.get(KWARGS_ENTRY) or {}))
    classes = recorded_classes(payload)
    return view, {PEER_KEYS[k]: v for k, v in classes.items() if k in PEER_KEYS}


def _read_peer_file(path: Path, error: CorruptCheckpointError) -> Any:
    """The file read as pytorch-accelerated wrote it (plain ``torch.save``); ``error``
    (why it is no scramjet checkpoint) is raised again if it cannot be read that way."""
    try:
        with _numpy_data_allowed():
            raw = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as refused:  # intact, but holds what this reader refuses
        raise CheckpointError(_refusal(path, refused)) from None
    except Exception:
        raise error from None
    holder = _object_array_in(raw)
    if holder is not None:
        raise CheckpointError(_refusal(path, pickle.UnpicklingError(holder)))
    return raw


_NUMPY_OBJECTS = re.compile(r"but got <class 'numpy\.dtypes\.(?:Object|Void)DType'>|^entry ")


def _refusal(path: Path, refused: Exception) -> str:
    """Why ``path``, read as a pytorch-accelerated file, is refused, and how to load it."""
    if _NUMPY_OBJECTS.search(str(refused)) is None:
        return f"checkpoint {str(path)!r} cannot be read: {_unreadable_reason(path, refused)}"
    return (
        f"checkpoint {str(path)!r} (a pytorch-accelerated file) holds a numpy array of "
        "Python objects (dtype=object) or of structured records; "
        "torch.load(weights_only=True) does not build those, since their elements could be "
        "any object. Numeric arrays, numpy scalars and dtypes load. If you trust this file, "
        "read it with torch.load(path, weights_only=False), turn such arrays into lists or "
        "numeric arrays, and save it again"
    )


def _object_array_in(value: Any, where: str = "") -> str | None:
    """``"entry <key>"`` of the first numpy array that holds Python objects, else None."""
    if isinstance(value, np.ndarray) and value.dtype.hasobject:
        return f"entry {where or '<top level>'}"
    if isinstance(value, dict):
        items: Iterable[tuple[object, Any]] = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _object_array_in(item, f"{where}[{key!r}]")
        if found is not None:
            return found
    return None


def _numpy_data_allowed() -> contextlib.AbstractContextManager[Any]:
    """Let ``weights_only=True`` rebuild numpy scalars, dtypes and numeric arrays (data,
    not code).

    pytorch-accelerated saved ``checkpoint_kwargs`` as given, so its files often hold
    ``np.float64`` metrics or ``np.array`` per-class scores. Unpickling one calls numpy's
    scalar constructor or ``_reconstruct`` with ``ndarray`` and a dtype, then sets the
    array's shape, dtype and raw bytes; nothing else. An array of Python objects or of
    structured records stays refused: its dtype's class (``ObjectDType``, ``VoidDType``)
    is not allowed. Files of numpy 1.x name these functions ``numpy.core.multiarray.*``.
    torch 2.4 has no scoped allow-list (``torch.serialization.safe_globals``): there the
    file is read as before.
    """
    safe_globals = getattr(torch.serialization, "safe_globals", None)
    if safe_globals is None:
        return contextlib.nullcontext()
    dtype_types = {type(np.dtype(code)) for code in np.typecodes["All"] if code not in "OV"}
    scalar: Any = np.array(0.0)[()].__reduce__()[0]  # numpy's multiarray.scalar
    reconstruct: Any = np.array([0.0]).__reduce__()[0]  # numpy's multiarray._reconstruct
    # bytes: protocol 2 pickles empty raw data (an empty array's) as a call of bytes()
    allowed: list[Any] = [scalar, reconstruct, np.dtype, np.ndarray, bytes]
    allowed += sorted(dtype_types, key=lambda t: t.__name__)
    if TorchVersion(torch.__version__) >= "2.6":  # (object, name) pairs are understood
        allowed += [(f, f"numpy.core.multiarray.{f.__name__}") for f in (scalar, reconstruct)]
    return safe_globals(allowed)  # type: ignore[no-any-return]
