"""After an S3 outage (a real moto server stopped and started again), the checkpoints
saved during it are uploaded late; the local folder and the store then keep exactly
``keep_last`` (and the best) as they would without the outage."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from tests.tracking.s3_helpers import S3Server, s3, s3_server  # noqa: F401  (fixtures)

from scramjet.checkpoint.remote import RemoteCheckpointManager, load_remote


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("ckpt-*.pt"))


def _remote(server: S3Server, bucket: str) -> list[str]:
    return sorted(k.rsplit("/", 1)[-1] for k in server.list_keys(bucket) if "/ckpt-" in k)


# keep_best=1 covers the plain rotation too; keep_best=0 alone runs with the slow tests
@pytest.mark.parametrize("keep_best", [pytest.param(0, marks=pytest.mark.slow), 1])
def test_late_uploads_are_rotated_locally_and_on_the_store(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
    keep_best: int,
) -> None:
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/run/ckpt"
    losses = [0.1, 0.5, 0.4, 0.3, 0.2]  # the first is the best
    manager = RemoteCheckpointManager(
        url, tmp_path / "local", keep_last=2, keep_best=keep_best, monitor="loss",
        upload_attempts=1,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for step, loss in enumerate(losses):
            if step == 2:
                s3.stop()  # steps 2 and 3 are saved during the outage
            if step == 4:
                s3.start()
            manager.save({"x": torch.tensor(step)}, step=step, metrics={"loss": loss})
            manager.wait()
        manager.close()

    want = ["ckpt-000004-step3.pt", "ckpt-000005-step4.pt"]
    if keep_best:
        want = ["ckpt-000001-step0.pt", *want]
    assert _names(tmp_path / "local") == want
    assert _remote(s3, bucket) == want
    result = load_remote(url, {}, local_dir=tmp_path / "fresh")
    assert result.step == 4
    assert torch.equal(result.values["x"], torch.tensor(4))
