"""Run under torchrun: TrainLoop(gpu_mode='ddp') on 2 CPU processes; writes what each rank saw."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from aitb_helpers import MyNeuralModel, loaders
from torch import nn

from scramjet.compat.aitoolbox import ClassificationResultPackage
from scramjet.compat.aitoolbox.tracked import TrainLoopCheckpointEndSave
from scramjet.runtime import distributed as dist


def main(out: Path) -> None:
    torch.manual_seed(0)
    model = MyNeuralModel()
    train, val, test = loaders(batch_size=8)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    loop = TrainLoopCheckpointEndSave(
        model,
        train,
        val,
        test,
        opt,
        nn.CrossEntropyLoss(),
        "p",
        "ddp",
        str(out / "runs"),
        {"lr": 1e-2},
        val_result_package=ClassificationResultPackage(),
        gpu_mode="ddp",
    )
    trained = loop.fit(num_epochs=2)
    y_pred, y_true, meta = loop.predict_on_validation_set()
    adam_steps = {int(s["step"]) for s in opt.state.values()}
    rank = dist.get_rank()
    weights = [float(v) for v in trained.l1.weight.detach().flatten()[:5]]
    (out / f"rank{rank}.json").write_text(
        json.dumps(
            {
                "returned_model": trained is model,
                "global_step": loop.total_iteration_idx,
                "adam_steps": sorted(adam_steps),
                "n_pred": len(y_pred),
                "y_true": y_true.tolist(),
                "meta": meta["first_feature"],
                "weights": weights,
                "world": dist.get_world_size(),
                "run_dir": str(loop.experiment.run_dir),
            }
        )
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
