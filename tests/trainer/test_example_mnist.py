"""Seed 004's README example runs with only its import changed (small generated data)."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pytorch_accelerated_mnist.py"
METRICS = re.compile(r"^epoch (\d+) \| eval_loss_epoch: ([\d.]+) \| train_loss_epoch: ([\d.]+)$")


def test_only_the_import_differs_from_the_readme() -> None:
    source = EXAMPLE.read_text()
    assert "from scramjet import Trainer" in source
    assert "from pytorch_accelerated" not in source and "torchvision" not in source
    for line in (
        "optimizer = optim.SGD(model.parameters(), lr=0.001, momentum=0.9)",
        "loss_func = nn.CrossEntropyLoss()",
        "        per_device_batch_size=32,",
        "        nn.LogSoftmax(dim=1),",
        "        return self.main(input.view(input.shape[0], -1))",
    ):
        assert line.strip() in source, line


def test_readme_example_runs_and_learns() -> None:
    env = {
        **os.environ,
        "SCRAMJET_EXAMPLE_SAMPLES": "3600",
        "SCRAMJET_EXAMPLE_EPOCHS": "2",
        "OMP_NUM_THREADS": "1",
    }
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, env=env, timeout=240
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [m.groups() for line in out.stdout.splitlines() if (m := METRICS.match(line))]
    assert [r[0] for r in rows] == ["1", "2"], out.stdout
    eval_losses = [float(r[1]) for r in rows]
    train_losses = [float(r[2]) for r in rows]
    chance = math.log(10)
    assert train_losses[1] < train_losses[0] < chance
    assert eval_losses[1] < eval_losses[0]
    assert eval_losses[1] < 0.7 * chance, "well below chance level after two epochs"
    assert "samples/s" in out.stdout, "the default progress bar reports throughput"
