"""gpu_mode='ddp' under torchrun: two real gloo processes, no spawning, no fixed port."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from aitb_helpers import dataset

pytestmark = pytest.mark.distributed

WORKER = str(Path(__file__).with_name("ddp_worker.py"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_trainloop_ddp_under_torchrun(tmp_path: Path) -> None:
    here = str(Path(__file__).parent)
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": here + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-port",
        str(_free_port()),
        WORKER,
        str(tmp_path),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    val = dataset(33, 1)
    for s in seen:
        assert s["world"] == 2 and s["returned_model"], "fit returns the model on every rank"
        # 96 samples / 2 ranks / batch 8 = 6 updates per epoch, applied once (not once per rank)
        assert s["global_step"] == 11 and s["adam_steps"] == [12]  # batches, from -1
        assert s["n_pred"] == 33 and s["y_true"] == val.tensors[1].tolist(), (
            "no padding, dataset order"
        )
        assert s["meta"] == val.tensors[0][:, 0].tolist()
    assert seen[0]["weights"] == seen[1]["weights"]
    run = Path(seen[0]["run_dir"])
    assert seen[1]["run_dir"] == str(run) and len(list(run.parent.iterdir())) == 1
    results = json.loads((run / "results" / "val.json").read_text())
    assert sum(map(sum, results["confusion_matrix"])) == 33
