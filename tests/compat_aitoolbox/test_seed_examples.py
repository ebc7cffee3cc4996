"""The seed README's snippets, with only the imports changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from aitb_helpers import MyNeuralModel, loaders
from s3_helpers import S3Server
from torch import nn

from scramjet.compat.aitoolbox import *  # noqa: F403
from scramjet.compat.aitoolbox import ClassificationResultPackage, TrainLoop
from scramjet.compat.aitoolbox.tracked import TrainLoopCheckpointEndSave


def _parts():
    torch.manual_seed(0)
    model = MyNeuralModel()
    train_loader, val_loader, test_loader = loaders()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    criterion = nn.CrossEntropyLoss()
    return model, train_loader, val_loader, test_loader, optimizer, criterion


def test_readme_trainloop_fit_returns_the_trained_model() -> None:
    model, train_loader, val_loader, test_loader, optimizer, criterion = _parts()
    before = model.l1.weight.detach().clone()
    tl = TrainLoop(model, train_loader, val_loader, test_loader, optimizer, criterion)

    model = tl.fit(num_epochs=3)
    assert isinstance(model, MyNeuralModel) and not torch.equal(before, model.l1.weight)
    assert len(tl.train_history["loss"]) == 3 and len(tl.train_history["val_loss"]) == 3
    assert tl.train_history["loss"][-1] < tl.train_history["loss"][0]
    assert tl.total_iteration_idx == 3 * 6 - 1  # batches, counted from -1 as in AIToolbox


def test_readme_checkpoint_endsave_on_s3(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3.client().create_bucket(Bucket="models")
    monkeypatch.chdir(tmp_path)
    model, train_loader, validation_loader, test_loader, optimizer, criterion = _parts()
    project_name, experiment_name, local_model_result_folder_path = "proj", "exp1", "results"
    hyperparams = {"lr": 1e-2, "batch_size": 16}
    tl = TrainLoopCheckpointEndSave(
        model,
        train_loader,
        validation_loader,
        test_loader,
        optimizer,
        criterion,
        project_name,
        experiment_name,
        local_model_result_folder_path,
        hyperparams,
        val_result_package=ClassificationResultPackage(),
        test_result_package=ClassificationResultPackage(),
        cloud_save_mode="s3",
        bucket_name="models",
        cloud_dir_prefix="",
    )
    tl.fit(num_epochs=2)
    run = tl.experiment.run_dir
    assert run.parent == tmp_path / "results" / "proj"
    val = json.loads((run / "results" / "val.json").read_text())
    y_pred, y_true, meta = tl.predict_on_validation_set()
    assert len(y_pred) == 33 and len(meta["first_feature"]) == 33
    assert val["accuracy"] == pytest.approx(float((y_pred == y_true).float().mean()))
    assert (run / "results" / "test.json").is_file() and (
        run / "checkpoints" / "index.json"
    ).is_file()
    keys = s3.list_keys("models")
    assert f"proj/{run.name}/results/val.json" in keys and f"proj/{run.name}/model/model.pt" in keys
    assert json.loads((run / "manifest.json").read_text())["ok"]


def test_construction_without_credentials_does_not_touch_the_cloud(tmp_path: Path) -> None:
    model, train_loader, validation_loader, test_loader, optimizer, criterion = _parts()
    TrainLoopCheckpointEndSave(
        model,
        train_loader,
        validation_loader,
        test_loader,
        optimizer,
        criterion,
        "p",
        "e",
        str(tmp_path / "r"),
        {},
        cloud_save_mode="s3",
        bucket_name="models",
    )
    assert not (tmp_path / "r").exists()


def test_readme_dp_mode_trains_in_one_process_below_two_gpus() -> None:
    # gpu_mode="ddp" starts its own processes: tests/compat_aitoolbox/test_tt_ddp.py
    model, train_loader, val_loader, test_loader, optimizer, criterion = _parts()
    if torch.cuda.device_count() > 1:
        pytest.skip("with several GPUs dp uses DataParallel (test_tt_loop.py, gpu marker)")
    with pytest.warns(UserWarning, match="gpu_mode='dp'"):
        out = TrainLoop(
            model, train_loader, val_loader, test_loader, optimizer, criterion, gpu_mode="dp"
        ).fit(num_epochs=1)
    assert out is model


def test_readme_amp_dict_turns_on_autocast() -> None:
    model, train_loader, val_loader, test_loader, optimizer, criterion = _parts()
    tl = TrainLoop(
        model,
        train_loader,
        val_loader,
        test_loader,
        optimizer,
        criterion,
        use_amp={"opt_level": "O1"},
    )
    tl.fit(num_epochs=1)
    assert tl.trainer is not None and tl.trainer.precision == "bf16"  # CPU autocast
    assert (
        TrainLoop(
            model, train_loader, None, None, optimizer, criterion, use_amp={"opt_level": "O0"}
        )._precision()
        == "no"
    )


def test_bad_gpu_mode_and_empty_fit() -> None:
    model, train_loader, val_loader, test_loader, optimizer, criterion = _parts()
    with pytest.raises(ValueError, match="gpu_mode must be one of"):
        TrainLoop(
            model, train_loader, val_loader, test_loader, optimizer, criterion, gpu_mode="tpu"
        )
    with pytest.raises(ValueError, match="num_epochs > 0 or num_iterations > 0"):
        TrainLoop(model, train_loader, val_loader, test_loader, optimizer, criterion).fit()
    with pytest.raises(ValueError, match="cloud_save_mode"):
        TrainLoopCheckpointEndSave(
            model,
            train_loader,
            val_loader,
            test_loader,
            optimizer,
            criterion,
            "p",
            "e",
            "r",
            {},
            cloud_save_mode="dropbox",
        )
