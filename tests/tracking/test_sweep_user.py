"""A user who runs many experiments: sweeps in one process, parallel processes sharing a
root, notebooks calling ``train()`` again, ``resume="latest"`` among several experiments."""

from __future__ import annotations

import json
from pathlib import Path

from tracking_helpers import make_trainer, tiny_data

from scramjet.tracking import Experiment


def _train(exp: Experiment, epochs: int = 1) -> None:
    make_trainer([exp]).train(tiny_data(32), num_epochs=epochs, per_device_batch_size=16)


def test_resume_latest_ignores_runs_of_an_experiment_whose_name_extends_its_own(
    tmp_path: Path,
) -> None:
    mlp = Experiment("sweep", "mlp", root=tmp_path, save_script=False)
    _train(mlp)
    big = Experiment("sweep", "mlp_big", root=tmp_path, save_script=False)
    _train(big)

    again = Experiment("sweep", "mlp", root=tmp_path, resume="latest", save_script=False)
    _train(again, epochs=2)

    assert again.run_dir == mlp.run_dir
    big_info = json.loads((big.run_dir / "run.json").read_text())
    assert "resumed" not in big_info and big_info["experiment"] == "mlp_big"
