"""Checkpoint files with pytorch-accelerated's top-level keys that are scramjet checkpoints too.

A file holds scramjet's payload (``state`` with the model, optimizer, scheduler, counters,
history, RNG states: what exact resume needs; checksum trailer) and, at the top level,
the peer's keys: ``model_state_dict``, ``optimizer_state_dict``, ``scheduler_state_dict``
(each the same tensors as the entry under ``state``: stored once) and every
``checkpoint_kwargs`` entry. Code that does ``torch.load(path)["model_state_dict"]`` keeps
working, and ``Trainer.train(resume_from=path)`` resumes from it exactly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from scramjet.checkpoint import CorruptCheckpointError, read_checkpoint
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
    with ``weights_only=True``, and has no state entries.
    """
    try:
        payload = read_checkpoint(path)
    except CorruptCheckpointError as error:
        try:
            raw = torch.load(path, map_location="cpu", weights_only=True)
        except Exception:
            raise error from None
        if isinstance(raw, dict) and MARKER not in raw and "model_state_dict" in raw:
            return raw, {}
        raise
    saved: dict[str, Any] = payload["state"]
    view = {k: from_storable(v) for k, v in payload.items() if k not in _RESERVED}
    view.update(from_storable(saved.get(KWARGS_ENTRY) or {}))
    return view, saved
