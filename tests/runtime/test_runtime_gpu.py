"""CUDA paths (run with `pytest -m gpu` on a machine with an NVIDIA GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from scramjet.checkpoint import CheckpointManager
from scramjet.runtime import GpuInfo, default_device, move_to_device, query_gpus, select_gpus

pytestmark = pytest.mark.gpu


def test_nvml_reports_the_gpus_cuda_sees() -> None:
    gpus = query_gpus()
    assert len(gpus) >= torch.cuda.device_count() >= 1
    assert all(isinstance(g, GpuInfo) and 0 < g.free_mib <= g.total_mib for g in gpus)
    chosen = select_gpus(1)
    assert chosen[0] == max(gpus, key=lambda g: (g.free_mib, -g.index)).index


def test_default_device_and_move(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_RANK", "0")
    device = default_device()
    assert device == torch.device("cuda", 0)
    moved = move_to_device({"x": [torch.ones(2)], "y": (torch.zeros(1), "s")}, device, True)
    assert moved["x"][0].is_cuda and moved["y"][0].is_cuda and moved["y"][1] == "s"


def test_checkpoint_round_trip_between_cpu_and_cuda(tmp_path: Path) -> None:
    model = nn.Linear(4, 3).cuda()
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(2, 4, device="cuda")).sum().backward()
    opt.step()
    manager = CheckpointManager(tmp_path)
    manager.save({"model": model, "optimizer": opt, "t": torch.ones(2, device="cuda")}, step=1)
    cpu_model = nn.Linear(4, 3)
    result = manager.load({"model": cpu_model})
    assert torch.equal(cpu_model.weight, model.weight.cpu())
    assert result.values["t"].device.type == "cpu"
    gpu_model = nn.Linear(4, 3).cuda()
    gpu_opt = torch.optim.Adam(gpu_model.parameters())
    result = manager.load({"model": gpu_model, "optimizer": gpu_opt}, map_location="cuda")
    assert torch.equal(gpu_model.weight, model.weight)
    assert gpu_opt.state_dict()["state"][0]["exp_avg"].is_cuda
    assert result.values["t"].is_cuda


def test_torchrun_with_more_processes_than_gpus_names_the_fix(tmp_path: Path) -> None:
    # Each NCCL process needs a GPU of its own; the process past the last one got CUDA's
    # 'invalid device ordinal' from torch.cuda.set_device.
    import socket
    import subprocess
    import sys

    script = tmp_path / "job.py"
    script.write_text("from scramjet.runtime import init_distributed\ninit_distributed()\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = torch.cuda.device_count() + 1
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(procs)]
    run = subprocess.run(
        [*cmd, "--master-port", str(port), str(script)],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert run.returncode != 0
    out = run.stdout + run.stderr
    assert f"this machine has {procs - 1} CUDA device(s)" in out, out[-3000:]
    assert "CUDA_VISIBLE_DEVICES=" in out and "invalid device ordinal" not in out
