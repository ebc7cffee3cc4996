"""ModelEmaCallback refuses an FSDP2-sharded model with a clear error instead of averaging
and saving one rank's shards. Run in a subprocess: it needs a (one-rank) process group."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import os, torch
    import torch.distributed as td
    from torch.distributed.fsdp import fully_shard
    from torch.utils.data import TensorDataset
    from scramjet import Trainer
    from scramjet.callbacks import ModelEmaCallback

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PORT"])
    td.init_process_group("gloo", rank=0, world_size=1)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
    fully_shard(model)
    trainer = Trainer(model, torch.nn.CrossEntropyLoss(),
                      torch.optim.SGD(model.parameters(), lr=0.1),
                      callbacks=[ModelEmaCallback()])
    data = TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))
    try:
        trainer.train(data, num_epochs=1, per_device_batch_size=4)
    except Exception as exc:  # CallbackError wrapping the ValueError
        print("ERROR:", exc)
    td.destroy_process_group()
    """
)


def test_ema_refuses_a_sharded_model() -> None:
    from tests.distributed.test_example_script import free_port

    env = {"PORT": str(free_port()), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        "ValueError in on_training_run_start: ModelEmaCallback received a model sharded with FSDP2"
        in done.stdout
    )
    assert "Train with DDP" in done.stdout
