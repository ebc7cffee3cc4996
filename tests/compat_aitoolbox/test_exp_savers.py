"""AIToolbox local savers write scramjet checkpoint files and readable results files."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from scramjet.checkpoint.manager import read_checkpoint
from scramjet.compat.aitoolbox.experiment.local_experiment_saver import (
    FullPyTorchExperimentLocalSaver,
)
from scramjet.compat.aitoolbox.experiment.local_load.local_model_load import (
    PyTorchLocalModelLoader,
)
from scramjet.compat.aitoolbox.experiment.local_save.local_model_save import (
    LocalSubOptimalModelRemover,
    PyTorchLocalModelSaver,
)
from scramjet.compat.aitoolbox.experiment.result_package.abstract_result_packages import (
    AbstractResultPackage,
)
from scramjet.compat.aitoolbox.experiment.result_reporting.hyperparam_reporter import (
    HyperParamSourceReporter,
)
from scramjet.compat.aitoolbox.experiment.result_reporting.report_generator import (
    TrainingHistoryWriter,
)


class Fixed(AbstractResultPackage):
    def __init__(self) -> None:
        super().__init__("Fixed")

    def prepare_results_dict(self) -> dict[str, Any]:
        return {"acc": 0.5}


def checkpoint(model: nn.Module) -> dict[str, Any]:
    return {
        "model_state_dict": model.state_dict(),
        "optimizer_state_dict": None,
        "epoch": 3,
        "hyperparams": {"lr": 0.1},
    }


def test_model_saver_writes_a_scramjet_checkpoint_the_loader_restores(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.DataParallel(nn.Linear(4, 2))
    saver = PyTorchLocalModelSaver(str(tmp_path), checkpoint_model=True)
    name, path = saver.save_model(checkpoint(model), "proj", "exp", "T1", epoch=3)
    assert name == "model_exp_T1_E3.pth"
    assert Path(path) == tmp_path / "proj" / "exp_T1" / "checkpoint_model" / name
    payload = read_checkpoint(path)  # the core's reader: checksum and layout verified
    assert payload["epoch"] == 3 and payload["state"]["hyperparams"] == {"lr": 0.1}
    fresh = nn.Linear(4, 2)
    loader = PyTorchLocalModelLoader(str(tmp_path))
    loader.load_model("proj", "exp", "T1", "checkpoint_model", 3)
    loader.init_model(fresh, used_data_parallel=True)
    assert torch.equal(fresh.weight, model.module.weight)
    with pytest.raises(ValueError, match="optimizer_state_dict"):
        saver.save_model({"model_state_dict": {}, "epoch": 1, "hyperparams": {}}, "p", "e", "T")


def test_model_file_has_aitoolbox_keys_at_the_top_level(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    saver = PyTorchLocalModelSaver(str(tmp_path), checkpoint_model=True)
    state = {**checkpoint(model), "iteration_idx": 7}
    name, path = saver.save_model(state, "proj", "exp", "T1", epoch=3, iteration_idx=7)
    assert name == "model_exp_T1_E3_ITER7.pth"
    plain = torch.load(path, weights_only=True)  # what code written for AIToolbox does
    assert plain["epoch"] == 3 and plain["iteration_idx"] == 7
    assert plain["hyperparams"] == {"lr": 0.1}
    assert torch.equal(plain["model_state_dict"]["weight"], model.weight)
    payload = read_checkpoint(path)  # still a checksummed scramjet checkpoint
    assert torch.equal(payload["state"]["model_state_dict"]["weight"], model.weight)


def test_suboptimal_remover_deletes_the_files_of_the_worst_checkpoint(tmp_path: Path) -> None:
    files = [tmp_path / f"m{i}.pth" for i in range(3)]
    for f in files:
        f.write_bytes(b"x")
    remover = LocalSubOptimalModelRemover("val_loss", num_best_kept=2)
    history: dict[str, list[float]] = {"val_loss": []}
    for f, loss in zip(files, [0.5, 0.9, 0.2], strict=True):
        history["val_loss"].append(loss)
        remover.decide_if_remove_suboptimal_model(history, [str(f)])
    assert [f.exists() for f in files] == [True, False, True]


@pytest.mark.parametrize("file_format", ["pickle", "json"])
def test_full_local_saver_writes_model_and_results(tmp_path: Path, file_format: str) -> None:
    pkg = Fixed()
    pkg.prepare_result_package([1, 0], [1, 1], {"lr": 0.1})
    saver = FullPyTorchExperimentLocalSaver("proj", "exp", "T2", str(tmp_path), file_format)
    paths = saver.save_experiment(checkpoint(nn.Linear(2, 2)), pkg, {"loss": [1.0, 0.5]})
    exp = tmp_path / "proj" / "exp_T2"
    ext = ".p" if file_format == "pickle" else ".json"
    assert paths == [
        str(exp / "model" / "model_exp_T2.pth"),
        str(exp / "results" / f"results_hyperParams_hist_exp_T2{ext}"),
        str(exp / "results" / "plots" / "loss.png"),  # one plot per history curve
    ]
    assert Path(paths[2]).read_bytes().startswith(b"\x89PNG")
    raw = Path(paths[1]).read_bytes()
    saved = pickle.loads(raw) if file_format == "pickle" else json.loads(raw)
    assert saved["results"] == {"acc": 0.5} and saved["training_history"] == {"loss": [1.0, 0.5]}
    assert saved["hyperparameters"] == {"lr": 0.1}


def test_history_writer_and_hyperparameter_file(tmp_path: Path) -> None:
    writer = TrainingHistoryWriter(str(tmp_path))
    history = {"loss": [1.0, 0.5], "val_loss": [], "acc": [0.7]}
    writer.generate_report(history, 0, "h.tsv", "res", file_format="tsv")
    history["f1"] = [0.3]
    rel, path = writer.generate_report(history, 1, "h.tsv", "res", file_format="tsv")
    assert rel == "res/h.tsv"
    assert Path(path).read_text().splitlines() == [
        "Epoch\tloss\tacc",
        "0\t0.5\t0.7",
        "NEW_METRICS_DETECTED",
        "Epoch\tloss\tacc\tf1",
        "1\t0.5\t0.7\t0.3",
    ]
    reporter = HyperParamSourceReporter("proj", "exp", "T", str(tmp_path))
    text = Path(reporter.save_hyperparams_to_text_file({"lr": 0.1, "bs": 32})).read_text()
    assert text == "lr:\t0.1\nbs:\t32\n"
