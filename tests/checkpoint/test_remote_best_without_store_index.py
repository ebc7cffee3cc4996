"""``which="best"`` on a fresh machine when the store has no usable ``index.json`` (a run
saved before the store had one, or an index deleted or damaged): the ranking is rebuilt
from the stored checkpoints' own metadata and written back; real S3 (moto)."""

from __future__ import annotations

import json
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


@pytest.mark.parametrize("damage", ["deleted", "not json", "a list", "wrong entries"])
def test_best_on_a_fresh_machine_without_a_usable_store_index(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
    damage: str,
) -> None:
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/run/ckpt"
    save_run(url, tmp_path / "first-machine")
    key = "run/ckpt/index.json"
    if damage == "deleted":
        s3.client().delete_object(Bucket=bucket, Key=key)
    else:
        body = {
            "not json": b'{"checkpoints": [',
            "a list": b"[1, 2]",
            "wrong entries": json.dumps({"checkpoints": [{"seq": "x"}]}).encode(),
        }[damage]
        s3.client().put_object(Bucket=bucket, Key=key, Body=body)
    fresh = RemoteCheckpointManager(url, tmp_path / "fresh", monitor="loss")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the store answers: nothing to warn about
        result = fresh.load({}, which="best")
    assert (result.step, result.metrics["loss"]) == (2, 0.1)
    assert torch.equal(result.values["w"], torch.full((3,), 2.0))
    fresh.close()
    # The rebuilt index was written back: the next fresh machine ranks from it alone.
    index = json.loads(s3.client().get_object(Bucket=bucket, Key=key)["Body"].read())
    ranked = {e["file"]: e["metrics"]["loss"] for e in index["checkpoints"]}
    stored = {k.rsplit("/", 1)[1] for k in s3.list_keys(bucket) if k.endswith(".pt")}
    assert set(ranked) == stored and 0.1 in ranked.values()


def test_a_store_without_rotation_or_index_ranks_every_checkpoint(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    """No ``keep_last``: every checkpoint is on the store; the best is the oldest one."""
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/run/ckpt"
    with RemoteCheckpointManager(url, tmp_path / "a", monitor="loss") as m:
        for step, loss in enumerate([0.2, 0.3, 0.4], start=1):
            m.save({"w": torch.full((2,), float(step))}, step=step, metrics={"loss": loss})
    s3.client().delete_object(Bucket=bucket, Key="run/ckpt/index.json")
    fresh = RemoteCheckpointManager(url, tmp_path / "b", monitor="loss")
    assert fresh.best_path == tmp_path / "b" / "ckpt-000001-step1.pt"
    assert fresh.load({}, which="best").step == 1
    # Ranking read the other checkpoints' metadata on the store, it did not download them.
    assert sorted(p.name for p in (tmp_path / "b").glob("*.pt")) == ["ckpt-000001-step1.pt"]
    fresh.close()
