"""``keep_best`` on the store after a resume on another machine: the earlier machine's best
is ranked with the new saves (its metrics are in the store's index) and rotated away once
it is no longer among the best, instead of staying on the store for good; real S3 (moto)."""

from __future__ import annotations

from pathlib import Path

import torch
from tests.tracking.s3_helpers import S3Server, s3, s3_server  # noqa: F401  (fixtures)

from scramjet.checkpoint.remote import RemoteCheckpointManager


def save(m: RemoteCheckpointManager, losses: list[float], first: int) -> None:
    for step, loss in enumerate(losses, start=first):
        m.save({"w": torch.full((2,), float(step))}, step=step, metrics={"loss": loss})


def stored(s3: S3Server, bucket: str) -> list[str]:  # noqa: F811
    return sorted(k.rsplit("/", 1)[1] for k in s3.list_keys(bucket) if k.endswith(".pt"))


def test_a_resumed_run_rotates_the_earlier_best_off_the_store(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/run/ckpt"
    options = {"keep_last": 1, "keep_best": 1, "monitor": "loss"}
    with RemoteCheckpointManager(url, tmp_path / "a", **options) as m:
        save(m, [0.5, 0.1, 0.9, 0.7], first=1)
    assert stored(s3, bucket) == ["ckpt-000002-step2.pt", "ckpt-000004-step4.pt"]
    # Another machine resumes and saves a better checkpoint, then worse ones.
    with RemoteCheckpointManager(url, tmp_path / "b", **options) as m:
        assert m.load({}, which="latest").step == 4
        save(m, [0.05, 0.8, 0.85], first=5)
    assert stored(s3, bucket) == ["ckpt-000005-step5.pt", "ckpt-000007-step7.pt"]
    # A third machine saves worse checkpoints: the best of the run stays.
    with RemoteCheckpointManager(url, tmp_path / "c", **options) as m:
        save(m, [0.6, 0.7], first=8)
    assert stored(s3, bucket) == ["ckpt-000005-step5.pt", "ckpt-000009-step9.pt"]
    fresh = RemoteCheckpointManager(url, tmp_path / "d", monitor="loss")
    assert fresh.load({}, which="best").step == 5
    fresh.close()
