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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scramjet.checkpoint import CorruptCheckpointError, read_checkpoint
from scramjet.checkpoint._reading import _unreadable_reason
from scramjet.checkpoint.payload import (
    MARKER,
    build_payload,
    from_storable,
    write_checked,
)

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
    payload = build_payload(entries, seq=0, step=step, epoch=epoch, metrics=None)
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


def read_file(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(peer view, state entries)`` of a checkpoint file.

    The peer view has the top-level keys (state dicts and ``checkpoint_kwargs`` entries);
    a file written by pytorch-accelerated itself (no scramjet marker) is read as it is,
    with ``weights_only=True`` (numpy scalars and dtypes allowed), and has no state entries.
    """
    try:
        payload = read_checkpoint(path)
    except CorruptCheckpointError as error:
        try:
            with _numpy_scalars_allowed():
                raw = torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as refused:  # name what this reader refused
            raise CorruptCheckpointError(
                Path(path), _unreadable_reason(Path(path), refused)
            ) from None
        except Exception:
            raise error from None
        if isinstance(raw, dict) and MARKER not in raw and "model_state_dict" in raw:
            return raw, {}
        raise
    saved: dict[str, Any] = payload["state"]
    view = {k: from_storable(v) for k, v in payload.items() if k not in _RESERVED}
    view.update(from_storable(saved.get(KWARGS_ENTRY) or {}))
    return view, saved


def _numpy_scalars_allowed() -> contextlib.AbstractContextManager[Any]:
    """Let ``weights_only=True`` rebuild numpy scalars and dtypes (data, not code).

    pytorch-accelerated saved ``checkpoint_kwargs`` as given, so its files often hold
    ``np.float64`` metrics; unpickling one calls numpy's scalar constructor with a dtype,
    nothing else. Arrays and any other global stay refused. torch 2.4 has no scoped
    allow-list (``torch.serialization.safe_globals``): there the file is read as before.
    """
    safe_globals = getattr(torch.serialization, "safe_globals", None)
    if safe_globals is None:
        return contextlib.nullcontext()
    dtype_types = {type(np.dtype(code)) for code in np.typecodes["All"] if code not in "OV"}
    scalar = np.array(0.0)[()].__reduce__()[0]  # numpy's multiarray.scalar, 1.x and 2.x
    allowed: list[Any] = [scalar, np.dtype, *sorted(dtype_types, key=lambda t: t.__name__)]
    return safe_globals(allowed)  # type: ignore[no-any-return]
