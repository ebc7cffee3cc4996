"""AIToolbox cloud savers and loaders against a real S3 server (moto) on 127.0.0.1."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
import torch
from aitb_helpers import MyNeuralModel, loaders
from s3_helpers import S3Server
from torch import nn

from scramjet.checkpoint.manager import read_checkpoint
from scramjet.compat.aitoolbox import ClassificationResultPackage, TrainLoopCheckpointEndSave
from scramjet.compat.aitoolbox.cloud._transfer import (
    check_writable,
    mirror_files,
    put_file,
    s3_client,
)
from scramjet.compat.aitoolbox.cloud.AWS.data_access import BaseDataLoader, BaseDataSaver
from scramjet.compat.aitoolbox.cloud.AWS.model_load import PyTorchS3ModelLoader
from scramjet.compat.aitoolbox.experiment.experiment_saver import FullPyTorchExperimentS3Saver
from scramjet.compat.aitoolbox.experiment.result_package.abstract_result_packages import (
    AbstractResultPackage,
)
from scramjet.tracking.storage import StorageCheckError


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


def test_s3_transfers_use_a_boto3_client_built_from_the_storage_options() -> None:
    options = {
        "key": "k",
        "secret": "s",
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:1", "region_name": "eu-west-1"},
        "skip_instance_cache": True,
    }
    client = s3_client("s3://bucket/prefix", options)
    assert client is not None and client.meta.endpoint_url == "http://127.0.0.1:1"
    assert client.meta.region_name == "eu-west-1"
    assert s3_client("gs://bucket/prefix") is None
    assert s3_client("s3://bucket", {"requester_pays": True}) is None  # s3fs only: fsspec path


def test_storage_options_reach_the_server_without_environment_settings(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = s3.new_bucket()
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    options = {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": s3.endpoint, "region_name": "us-east-1"},
    }
    (tmp_path / "f.txt").write_text("payload")
    url = BaseDataSaver(bucket, storage_options=options).save_file(
        str(tmp_path / "f.txt"), "a/f.txt"
    )
    assert url == f"s3://{bucket}/a/f.txt" and s3.list_keys(bucket) == {"a/f.txt": 7}
    got = BaseDataLoader(bucket, str(tmp_path), storage_options=options).load_file(
        "a/f.txt", str(tmp_path / "back" / "f.txt")
    )
    assert Path(got).read_text() == "payload"


def test_a_failed_upload_raises_and_keeps_the_local_file(s3: S3Server, tmp_path: Path) -> None:
    local = tmp_path / "model.pth"
    local.write_bytes(b"weights")
    with pytest.raises(RuntimeError, match=r"upload of .* failed after 1 attempt\(s\): HTTP 404"):
        put_file(str(local), "s3://no-such-bucket-here/model.pth")
    with pytest.raises(RuntimeError, match="HTTP 404"):
        mirror_files(str(tmp_path), "s3://no-such-bucket-here/run", [str(local)])
    assert local.read_bytes() == b"weights"
    with pytest.raises(StorageCheckError, match=r"no-such-bucket-here.*HTTP 404"):
        check_writable(str(tmp_path), "s3://no-such-bucket-here/run")
    bucket = s3.new_bucket()
    check_writable(str(tmp_path), f"s3://{bucket}/run")  # the probe is written, then deleted
    assert s3.list_keys(bucket) == {}


def test_checkpointing_train_loop_mirrors_its_files_to_s3(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    torch.manual_seed(0)
    model = MyNeuralModel()
    train, val, test = loaders()
    loop = TrainLoopCheckpointEndSave(
        model,
        train,
        val,
        test,
        torch.optim.SGD(model.parameters(), lr=0.1),
        nn.CrossEntropyLoss(),
        project_name="proj",
        experiment_name="exp",
        local_model_result_folder_path=str(tmp_path),
        hyperparams={"lr": 0.1},
        val_result_package=ClassificationResultPackage(),
        test_result_package=ClassificationResultPackage(),
        cloud_save_mode="s3",
        bucket_name=bucket,
        cloud_dir_prefix="runs",
    )
    loop.fit(num_epochs=1)
    folder = f"runs/proj/exp_{loop.experiment_timestamp}"
    keys = s3.list_keys(bucket)
    stamp = loop.experiment_timestamp
    assert f"{folder}/checkpoint_model/model_exp_{stamp}_E0.pth" in keys
    assert f"{folder}/model/model_exp_{stamp}.pth" in keys
    local = tmp_path / "proj" / f"exp_{stamp}" / "model" / f"model_exp_{stamp}.pth"
    assert keys[f"{folder}/model/model_exp_{stamp}.pth"] == local.stat().st_size


def test_an_endpoint_that_never_answers_leaves_no_thread_to_wait_for_at_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each attempt abandoned at its deadline left boto3's transfer threads waiting on their
    # sockets; Python joins them at exit, so a script that saved during an outage took
    # about 50 s more to end, with no output.
    import concurrent.futures.thread
    import dataclasses
    import socket
    import threading

    from scramjet.compat.aitoolbox.cloud import _transfer

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []

    def accept_and_say_nothing() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept_and_say_nothing, daemon=True).start()
    short = dataclasses.replace(_transfer.StorageTimeouts(), connect=0.5, read=5.0, call=1.0)
    monkeypatch.setattr(_transfer, "StorageTimeouts", lambda: short)
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{listener.getsockname()[1]}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    local = tmp_path / "model.pth"
    local.write_bytes(b"weights")
    # what Python joins at exit: every live thread of a concurrent.futures pool
    joined_at_exit = concurrent.futures.thread._threads_queues
    before = {t for t in list(joined_at_exit) if t.is_alive()}
    try:
        with pytest.raises(RuntimeError, match="failed after 4 attempt"):
            put_file(str(local), "s3://bucket/model.pth")
        left = [t.name for t in list(joined_at_exit) if t.is_alive() and t not in before]
        assert left == [], f"threads the interpreter would wait for at exit: {left}"
        assert local.read_bytes() == b"weights"
    finally:
        listener.close()
        for conn in held:
            conn.close()
