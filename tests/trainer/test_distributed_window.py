"""Two real gloo processes: a partial accumulation window closed by end_epoch stays in sync."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from tests.common.torchrun import run_torchrun

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    sys.path.insert(0, {root!r})
    torch.set_num_threads(1)
    from scramjet.callbacks import LimitBatchesCallback
    from scramjet.runtime import distributed as dist
    from tests.common.world import TinyMLP, blobs, make_trainer

    model = TinyMLP()
    trainer = make_trainer(model, callbacks=[LimitBatchesCallback(3)], seed=0)
    # Windows of 2 batches; the limit ends each epoch inside the second window.
    trainer.train(blobs(n=64), num_epochs=2, per_device_batch_size=4,
                  gradient_accumulation_steps=2)
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = dist.gather(weights.unsqueeze(0))
    if dist.get_rank() == 0:
        print("steps", trainer.state.global_step)
        print("diff", float((gathered[0] - gathered[1]).abs().max()))
    # Drop the DDP wrapper before the process group: gloo aborts at exit otherwise.
    del trainer, model
    import gc
    gc.collect()
    dist.barrier()
    dist.destroy_distributed()
    """
)


@pytest.mark.distributed
def test_closed_window_gradients_are_averaged_across_ranks(tmp_path: Path) -> None:
    script = tmp_path / "ddp_window.py"
    script.write_text(SCRIPT.format(root=str(ROOT)))
    out = run_torchrun(script)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert lines["steps"] == "4"  # two updates per epoch: 2 batches, then the closed 1
    assert float(lines["diff"]) == 0.0, "ranks hold the same weights"
