"""``which="best"`` on a machine whose local folder is empty (a fresh machine resuming from
S3) ranks by the index on the store and downloads the best checkpoint; real S3 (moto)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from tests.tracking.s3_helpers import S3Server, s3, s3_server  # noqa: F401  (fixtures)

from scramjet.checkpoint.remote import RemoteCheckpointManager

LOSSES = [0.5, 0.1, 0.9, 0.7]  # the best (step 2) is neither the first nor the last


def save_run(url: str, local: Path) -> None:
    with RemoteCheckpointManager(url, local, keep_last=1, keep_best=1, monitor="loss") as m:
        for step, loss in enumerate(LOSSES, start=1):
            m.save({"w": torch.full((3,), float(step))}, step=step, metrics={"loss": loss})


@pytest.mark.parametrize("monitor", ["loss", None])
def test_best_on_a_fresh_machine_is_the_best_on_the_store(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
    monitor: str | None,
) -> None:
    url = f"s3://{s3.new_bucket()}/run/ckpt"
    save_run(url, tmp_path / "first-machine")
    fresh = RemoteCheckpointManager(url, tmp_path / "fresh", monitor=monitor)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to warn about: the store answers
        result = fresh.load({}, which="best")
    assert (result.step, result.metrics["loss"]) == (2, 0.1)
    assert torch.equal(result.values["w"], torch.full((3,), 2.0))
    assert fresh.best_path == tmp_path / "fresh" / result.path.name
    fresh.close()


def test_a_fresh_machine_ranks_the_store_above_its_own_older_copies(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    url = f"s3://{s3.new_bucket()}/run/ckpt"
    save_run(url, tmp_path / "first-machine")
    # The second machine resumes, saves a worse checkpoint, and asks for the best again.
    with RemoteCheckpointManager(url, tmp_path / "second", monitor="loss", keep_best=1) as m:
        m.load({}, which="latest")
        m.save({"w": torch.zeros(3)}, step=5, metrics={"loss": 0.3})
    third = RemoteCheckpointManager(url, tmp_path / "third")
    assert third.load({}, which="best").step == 2
    third.close()
