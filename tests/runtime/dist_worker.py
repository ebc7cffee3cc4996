"""Worker run by torchrun / ``scramjet launch`` / ``scramjet.runtime.launch`` in the tests.

``python dist_worker.py MODE OUT_DIR``; each rank writes ``OUT_DIR/rank<r>.json`` with
what it observed, and the test checks those files. Modes:

- ``ok``: exercise reduce / gather / gather_object / broadcast_object / unpad helpers.
- ``raise``: rank 1 raises while rank 0 waits in a barrier.
- ``hang``: rank 1 stalls while rank 0 waits in an all-reduce; the timeout must end it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from scramjet.runtime import (
    barrier,
    broadcast_object,
    destroy_distributed,
    eval_sampler,
    gather,
    gather_for_metrics,
    gather_object,
    get_rank,
    get_world_size,
    init_distributed,
    is_distributed,
    is_main_process,
    reduce,
    unpad_gathered,
)

NUM_SAMPLES = 33


def observe() -> dict[str, Any]:
    """Run every helper once and return what this rank saw."""
    env = init_distributed()
    rank, world = get_rank(), get_world_size()
    seen: dict[str, Any] = {
        "env": [env.rank, env.world_size, env.local_rank, env.local_world_size],
        "rank": rank,
        "world": world,
        "distributed": is_distributed(),
        "main": is_main_process(),
        "backend": torch.distributed.get_backend(),
    }
    value = torch.tensor([float(rank + 1), 10.0 * (rank + 1)])
    seen["mean"] = reduce(value, "mean").tolist()
    seen["sum"] = reduce(value, "sum").tolist()
    seen["max"] = reduce(value, "max").tolist()
    seen["input_unchanged"] = value.tolist()
    # Rank r contributes r + 1 rows filled with r: sizes differ per rank.
    seen["gather"] = gather(torch.full((rank + 1, 2), float(rank))).tolist()
    ragged = torch.full((1, rank + 1), rank + 1)  # rank 0: [[1]], rank 1: [[2, 2]]
    seen["gather_padded"] = gather(ragged, pad_value=-100).tolist()
    try:
        gather(ragged)
        seen["gather_ragged"] = "no error"
    except ValueError as error:
        seen["gather_ragged"] = str(error)
    seen["gather_object"] = gather_object({"rank": rank, "word": "abc"[rank]})
    seen["broadcast"] = broadcast_object(f"from-{rank}")

    # Evaluation over 33 samples: predictions (2 * index) in dataset order, no padding.
    dataset = torch.arange(NUM_SAMPLES)
    loader = DataLoader(dataset, batch_size=4, sampler=eval_sampler(dataset))
    preds = torch.cat([batch * 2 for batch in loader])
    seen["local_count"] = len(preds)
    seen["eval"] = gather_for_metrics(preds, NUM_SAMPLES).tolist()
    rows = [item for part in gather_object(preds.tolist()) for item in part]
    seen["eval_objects"] = unpad_gathered(rows, NUM_SAMPLES)
    barrier()
    return seen


def main(mode: str, out_dir: str) -> dict[str, Any]:
    """Run ``mode`` and write this rank's observations; return them."""
    if mode == "ok":
        seen = observe()
    elif mode == "raise":
        init_distributed()
        if get_rank() == 1:
            raise ValueError("rank one exploded on purpose")
        barrier()  # rank 0 waits here until the launcher stops it
        seen = {"rank": get_rank(), "unexpected": "barrier returned"}
    elif mode == "hang":
        init_distributed()
        if get_rank() == 1:
            time.sleep(120)
        reduce(torch.ones(1), "sum")  # rank 0 waits here until the timeout fires
        seen = {"rank": get_rank(), "unexpected": "all-reduce returned"}
    else:
        raise ValueError(f"unknown mode {mode!r}")
    Path(out_dir, f"rank{seen['rank']}.json").write_text(json.dumps(seen))
    return seen


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    destroy_distributed()
