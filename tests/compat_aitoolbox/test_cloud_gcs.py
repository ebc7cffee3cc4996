"""AIToolbox's Google Cloud Storage savers against a real local emulator (gcp-storage-emulator).

gcsfs reaches the emulator through ``STORAGE_EMULATOR_HOST``; ``token="anon"`` skips the
credential search. gcsfs's experimental bucket-type probe (gRPC, no emulator support) is
switched off before gcsfs is imported.
"""

from __future__ import annotations

import importlib
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from scramjet.compat.aitoolbox.cloud.GoogleCloud.data_access import BaseDataLoader, BaseDataSaver
from scramjet.compat.aitoolbox.cloud.GoogleCloud.model_load import PyTorchGoogleStorageModelLoader
from scramjet.compat.aitoolbox.experiment.experiment_saver import (
    FullPyTorchExperimentGoogleStorageSaver,
)
from scramjet.compat.aitoolbox.experiment.result_package.abstract_result_packages import (
    AbstractResultPackage,
)

BUCKET = "models"
ANON = {"token": "anon", "project": "test"}


@pytest.fixture()
def gcs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from gcp_storage_emulator import server as server_mod  # dev extra: fail, never skip

    monkeypatch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    if "gcsfs" in sys.modules:  # imported earlier with the probe on: import it again
        importlib.reload(sys.modules["gcsfs"])
    import gcsfs

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = server_mod.create_server("127.0.0.1", port, in_memory=True, default_bucket=BUCKET)
    server.start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{port}")
    try:
        yield gcsfs.GCSFileSystem(skip_instance_cache=True, **ANON)
    finally:
        server.stop()


class Fixed(AbstractResultPackage):
    def __init__(self) -> None:
        super().__init__("Fixed")

    def prepare_results_dict(self) -> dict[str, Any]:
        return {"acc": 1.0}


def test_google_storage_saver_mirrors_the_local_experiment(gcs: Any, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    pkg = Fixed()
    pkg.prepare_result_package([1], [1], {})
    saver = FullPyTorchExperimentGoogleStorageSaver(
        "proj", "exp", "T9", BUCKET, "runs", str(tmp_path / "local"), storage_options=ANON
    )
    ckpt = {
        "model_state_dict": model.state_dict(),
        "optimizer_state_dict": None,
        "epoch": 2,
        "hyperparams": {},
    }
    urls = saver.save_experiment(ckpt, pkg, {"loss": [0.1]})
    base = f"gs://{BUCKET}/runs/proj/exp_T9"
    assert urls == [
        f"{base}/model/model_exp_T9.pth",
        f"{base}/results/results_hyperParams_hist_exp_T9.p",
    ]
    local = tmp_path / "local" / "proj" / "exp_T9"
    for url in urls:
        rel = url[len(base) + 1 :]
        assert gcs.info(url)["size"] == (local / rel).stat().st_size

    loader = PyTorchGoogleStorageModelLoader(
        str(tmp_path / "other"), BUCKET, "runs", storage_options=ANON
    )
    loader.load_model("proj", "exp", "T9", model_save_dir="model")
    assert torch.equal(loader.init_model(nn.Linear(3, 1)).weight, model.weight)


def test_google_storage_data_round_trip(gcs: Any, tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("payload")
    url = BaseDataSaver(BUCKET, storage_options=ANON).save_file(str(tmp_path / "f.txt"), "ds/f.txt")
    assert url == f"gs://{BUCKET}/ds/f.txt" and gcs.cat_file(url) == b"payload"
    out = BaseDataLoader(BUCKET, str(tmp_path), storage_options=ANON).load_file(
        "ds/f.txt", str(tmp_path / "g.txt")
    )
    assert Path(out).read_text() == "payload"
