"""Exported weights of wrapped models load into the plain model as the user built it.

``torch.compile`` puts the model under ``_orig_mod.`` (the compiled module's state dict
keys carry that prefix) and ``DistributedDataParallel`` under ``module.``. An
:class:`~scramjet.tracking.Experiment` exports ``model/model.pt`` and
``model/model.safetensors`` with the plain module's keys, so both load with
``strict=True`` into the uncompiled, unwrapped model and give the trained model's outputs:

- one process: a ``torch.compile(model, backend="eager")`` model (the eager backend
  still wraps the model and prefixes ``_orig_mod.``, and compiles quickly on a CPU);
- two processes (torchrun, gloo): the compiled model, wrapped by the Trainer in
  ``DistributedDataParallel`` (``DDP(compile(model))``, trained on dict batches: the
  keys passed are those the innermost model's forward takes), and a model the user
  wrapped in ``DDP`` themselves before the Trainer, which the Trainer should train as
  given rather than wrap a second time. This file is the job: ``python -m
  torch.distributed.run --nproc-per-node 2 test_compiled_export.py OUT``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from scramjet import Trainer
from scramjet.tracking import Experiment

DIM = 6


def make_model() -> nn.Module:
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(DIM, 16), nn.ReLU(), nn.Linear(16, 3))


def data(n: int = 48, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, DIM, generator=g)
    return TensorDataset(x, (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long())


class DictData(Dataset[dict[str, torch.Tensor]]):
    """``{"input": x, "labels": y}`` samples: ``Sequential.forward(input)`` takes the first."""

    def __init__(self, base: TensorDataset) -> None:
        self.base = base

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        x, y = self.base[i]
        return {"input": x, "labels": y}


def train_with_experiment(
    model: nn.Module, root: Path, name: str, dict_batches: bool = False
) -> tuple[Trainer, Experiment]:
    experiment = Experiment("export", name, root=root, save_script=False, checkpoint=None)
    trainer = Trainer(
        model,
        nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.2),
        callbacks=[experiment],
        seed=0,
    )
    train_data: Any = DictData(data()) if dict_batches else data()
    trainer.train(train_data, num_epochs=2, per_device_batch_size=8)
    return trainer, experiment


def assert_loads_into_plain_model(run_dir: Path, trained: dict[str, torch.Tensor]) -> None:
    """Both exported files load strictly into a fresh plain model equal to ``trained``."""
    x = data(10, seed=1).tensors[0]
    reference = make_model()
    reference.load_state_dict(trained, strict=True)
    with torch.no_grad():
        expected = reference(x)
    for state in (
        torch.load(run_dir / "model" / "model.pt", weights_only=True),
        load_file(run_dir / "model" / "model.safetensors"),
    ):
        assert set(state) == {"0.weight", "0.bias", "2.weight", "2.bias"}
        plain = make_model()
        plain.load_state_dict(state, strict=True)
        with torch.no_grad():
            assert torch.equal(plain(x), expected)
        for key, value in trained.items():
            assert torch.equal(state[key], value), key


def plain_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The trained weights under the plain model's names, read from the wrapped modules."""
    while True:
        if isinstance(model, nn.parallel.DistributedDataParallel):
            model = model.module
        elif isinstance(getattr(model, "_orig_mod", None), nn.Module):
            model = model._orig_mod  # type: ignore[assignment]
        else:
            return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_compiled_model_exports_plain_weights(tmp_path: Path) -> None:
    model = make_model()
    compiled = torch.compile(model, backend="eager")
    assert isinstance(compiled, nn.Module)
    assert all(k.startswith("_orig_mod.") for k in compiled.state_dict()), "the prefix exists"
    trainer, experiment = train_with_experiment(compiled, tmp_path, "compiled")
    assert trainer.unwrapped_model is compiled and trainer.state.global_step == 12
    trained = plain_state(compiled)
    assert not torch.equal(trained["0.weight"], make_model().state_dict()["0.weight"])
    assert_loads_into_plain_model(experiment.run_dir, trained)
    x = data(10, seed=1).tensors[0]
    with torch.no_grad():
        plain = make_model()
        plain.load_state_dict(torch.load(experiment.run_dir / "model" / "model.pt"))
        assert torch.equal(plain(x), compiled(x)), "the compiled model's outputs"


# ----------------------------------------------------------------------------- two processes
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The report of the two-process job (this file run by torchrun)."""
    out = tmp_path_factory.mktemp("ddp_export")
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
        "--master-port", str(free_port()), __file__, str(out),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    report: dict[str, Any] = torch.load(out / "report.pt", weights_only=False)
    return report


@pytest.mark.distributed
def test_ddp_wrapped_models_export_plain_weights(two_ranks: dict[str, Any]) -> None:
    assert two_ranks["compiled"]["wrapped"] == [
        "DistributedDataParallel", "OptimizedModule", "Sequential",
    ]  # fmt: skip
    assert two_ranks["user_ddp"]["wrapped"][0] == "DistributedDataParallel"
    for name in ("compiled", "user_ddp"):
        case = two_ranks[name]
        assert case["prefixed"], f"{name}: the given module's own keys carry a prefix"
        assert case["global_step"] == 6  # 48 samples, 2 ranks x 8 per batch, 2 epochs
        assert_loads_into_plain_model(Path(case["run_dir"]), case["trained"])


@pytest.mark.distributed
def test_a_model_already_in_ddp_is_not_wrapped_again(two_ranks: dict[str, Any]) -> None:
    """A model the user wrapped in DDP is trained as given, not as DDP(DDP(model))."""
    assert two_ranks["user_ddp"]["wrapped"] == ["DistributedDataParallel", "Sequential"]


def job(out: Path) -> None:
    """Both DDP cases on every rank; rank 0 writes ``OUT/report.pt``."""
    from scramjet.runtime import distributed as dist

    dist.init_distributed()
    report: dict[str, Any] = {}
    cases: dict[str, Any] = {
        "compiled": lambda: torch.compile(make_model(), backend="eager"),
        "user_ddp": lambda: nn.parallel.DistributedDataParallel(make_model()),
    }
    for name, build in cases.items():
        model = build()
        # DDP(compile(model)) takes dict batches: the keys are those Sequential.forward takes.
        trainer, experiment = train_with_experiment(
            model, out / "runs", name, dict_batches=name == "compiled"
        )
        chain, module = [], trainer.model
        while True:
            chain.append(type(module).__name__)
            inner = getattr(module, "module", None) or getattr(module, "_orig_mod", None)
            if not isinstance(inner, nn.Module):
                break
            module = inner
        report[name] = {
            "wrapped": chain,
            "prefixed": all("." in k and k.split(".")[0] in ("module", "_orig_mod")
                            for k in trainer.unwrapped_model.state_dict()),
            "trained": plain_state(trainer.model),
            "global_step": trainer.state.global_step,
            "run_dir": str(experiment.run_dir) if dist.is_main_process() else None,
        }  # fmt: skip
        dist.barrier()
        trainer.release_distributed_wrapper()
    if dist.is_main_process():
        torch.save(report, out / "report.pt")
    dist.destroy_distributed()


if __name__ == "__main__":
    job(Path(sys.argv[1]))
