"""AIToolbox cloud savers and loaders against a real S3 server (moto) on 127.0.0.1."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import torch
from s3_helpers import S3Server
from torch import nn

from scramjet.checkpoint.manager import read_checkpoint
from scramjet.compat.aitoolbox.cloud.AWS.data_access import BaseDataLoader, BaseDataSaver
from scramjet.compat.aitoolbox.cloud.AWS.model_load import PyTorchS3ModelLoader
from scramjet.compat.aitoolbox.experiment.experiment_saver import FullPyTorchExperimentS3Saver
from scramjet.compat.aitoolbox.experiment.result_package.abstract_result_packages import (
    AbstractResultPackage,
)


class Fixed(AbstractResultPackage):
    def __init__(self) -> None:
        super().__init__("Fixed")

    def prepare_results_dict(self) -> dict[str, Any]:
        return {"acc": 0.75}


def test_experiment_saver_uploads_what_it_writes_locally_and_the_loader_reads_it(
    s3: S3Server, tmp_path: Path
) -> None:
    bucket = s3.new_bucket()
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    pkg = Fixed()
    pkg.prepare_result_package([1], [1], {"lr": 0.1})
    saver = FullPyTorchExperimentS3Saver(
        "proj", "exp", "T1", bucket, "pre/fix", str(tmp_path / "local")
    )
    ckpt = {
        "model_state_dict": model.state_dict(),
        "optimizer_state_dict": None,
        "epoch": 1,
        "hyperparams": {"lr": 0.1},
    }
    urls = saver.save_experiment(ckpt, pkg, {"loss": [0.3]}, separate_files=True)
    base = f"s3://{bucket}/pre/fix/proj/exp_T1"
    assert urls == [
        f"{base}/model/model_exp_T1.pth",
        f"{base}/results/results_exp_T1.p",
        f"{base}/results/hyperparams_exp_T1.p",
        f"{base}/results/train_history_exp_T1.p",
    ]
    keys = s3.list_keys(bucket)
    local = tmp_path / "local" / "proj" / "exp_T1"
    for url in urls:  # byte-identical to the local files the local savers wrote
        rel = url[len(base) + 1 :]
        assert keys[f"pre/fix/proj/exp_T1/{rel}"] == (local / rel).stat().st_size
    body = s3.client().get_object(Bucket=bucket, Key="pre/fix/proj/exp_T1/results/results_exp_T1.p")
    assert pickle.loads(body["Body"].read())["results"] == {"acc": 0.75}

    loader = PyTorchS3ModelLoader(str(tmp_path / "elsewhere"), bucket, "pre/fix")
    loader.load_model("proj", "exp", "T1", model_save_dir="model")
    fresh = loader.init_model(nn.Linear(3, 2))
    assert torch.equal(fresh.weight, model.weight)
    downloaded = tmp_path / "elsewhere" / "proj" / "exp_T1" / "model" / "model_exp_T1.pth"
    assert read_checkpoint(downloaded)["epoch"] == 1


def test_data_saver_and_loader_round_trip_a_folder(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    src = tmp_path / "data"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("alpha")
    (src / "sub" / "b.txt").write_text("beta")
    BaseDataSaver(bucket).save_folder(str(src), "store")
    assert sorted(s3.list_keys(bucket)) == ["store/a.txt", "store/sub/b.txt"]
    target = tmp_path / "dl" / "b.txt"
    BaseDataLoader(bucket, str(tmp_path)).load_file("store/sub/b.txt", str(target))
    assert target.read_text() == "beta"


def test_ses_sender_sends_the_report_with_its_attachment(s3: S3Server, tmp_path: Path) -> None:
    import boto3

    from scramjet.compat.aitoolbox.cloud.AWS.simple_email_service import SESSender, build_message

    ses = boto3.client("ses", region_name="eu-west-1")
    ses.verify_email_identity(EmailAddress="bot@example.com")
    sent_before = ses.get_send_quota()["SentLast24Hours"]
    plot = tmp_path / "loss.png"
    plot.write_bytes(b"\x89PNG fake")
    sender = SESSender("Trainer", "bot@example.com", "me@example.com", "eu-west-1")
    assert sender.send_email("End of training", "<h2>done</h2>", [str(plot)])
    assert ses.get_send_quota()["SentLast24Hours"] > sent_before
    message = build_message("a@x", "b@x", "s", "<p>hi</p>", [str(plot)])
    parts = message.get_payload()
    assert (
        parts[1].get_filename() == "loss.png"
        and parts[1].get_payload(decode=True) == plot.read_bytes()
    )
