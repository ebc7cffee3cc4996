"""Reads a Weights & Biases offline run back from its ``.wandb`` files (W&B's record log:
32 KiB blocks of CRC-checked chunks holding ``wandb_internal_pb2.Record``s, the format
``wandb sync`` uploads). This wandb version ships no Python reader for them."""

from __future__ import annotations

import json
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_BLOCK = 32768
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _records(path: Path) -> Iterator[Any]:
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", "a W&B record log"
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        if _BLOCK - pos % _BLOCK < 7:  # a block's tail too short for a header is padding
            pos += _BLOCK - pos % _BLOCK
            continue
        checksum, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        if zlib.crc32(chunk, zlib.crc32(bytes([kind]))) != checksum:
            # W&B's service process may still be appending this chunk (the caller reads
            # again until the run's exit record is there); anything after it is damage.
            assert not data[pos:].strip(b"\0"), "a damaged chunk"
            return
        if kind == _FULL:
            yield wandb_internal_pb2.Record.FromString(chunk)
        elif kind == _FIRST:
            pending = chunk
        elif kind == _MIDDLE:
            pending += chunk
        elif kind == _LAST:
            yield wandb_internal_pb2.Record.FromString(pending + chunk)
            pending = b""


def _key(item: Any) -> str:
    return str(item.key or "/".join(item.nested_key))


def read_wandb_run(run_dir: Path) -> dict[str, Any]:
    """History rows, config, summary, run identity, saved files and exit codes of every
    offline run folder W&B wrote for this run (results logged after the run continue it)."""
    out: dict[str, Any] = {"history": [], "config": {}, "summary": {}, "files": set()}
    out["exits"], out["runs"], out["unfinished"] = [], [], 0
    for log in sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb")):
        exits = len(out["exits"])
        for record in _records(log):
            kind = record.WhichOneof("record_type")
            if kind == "history":
                out["history"].append(
                    {_key(item): json.loads(item.value_json) for item in record.history.item}
                )
            elif kind == "run":
                run = record.run
                out["runs"].append((run.run_id, run.project, run.display_name))
                out["config"].update({u.key: json.loads(u.value_json) for u in run.config.update})
            elif kind == "config":
                out["config"].update(
                    {u.key: json.loads(u.value_json) for u in record.config.update}
                )
            elif kind == "summary":
                for u in record.summary.update:
                    out["summary"][_key(u)] = json.loads(u.value_json)
            elif kind == "files":
                out["files"].update(f.path for f in record.files.files)
            elif kind == "exit":
                out["exits"].append(record.exit.exit_code)
        out["unfinished"] += len(out["exits"]) == exits  # no exit record in this file yet
    return out


def read_finished_wandb_run(run_dir: Path, timeout: float = 20) -> dict[str, Any]:
    """:func:`read_wandb_run` once every offline run folder's exit record is on disk (W&B's
    service process may still be writing a file for a moment after ``finish()`` returns;
    results logged after the run continue it in a second folder, finished later)."""
    deadline = time.monotonic() + timeout
    data = read_wandb_run(run_dir)
    while (not data["exits"] or data["unfinished"]) and time.monotonic() < deadline:
        time.sleep(0.2)
        data = read_wandb_run(run_dir)
    return data
