"""Rotation on the store never keeps a damaged checkpoint (a truncated upload, flipped
bytes) as one of the ``keep_best`` best in place of a readable one: the readable
runner-up stays on the store and ``load("best")`` on a fresh machine finds it; real S3
(moto), the stored object damaged through the S3 API."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.tracking.s3_helpers import S3Server, s3, s3_server  # noqa: F401  (fixtures)

from scramjet.checkpoint.remote import RemoteCheckpointManager


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _flip(data: bytes) -> bytes:
    middle = len(data) // 2
    flipped = bytes(b ^ 0xFF for b in data[middle : middle + 8])
    return data[:middle] + flipped + data[middle + 8 :]


def _damage(s3: S3Server, bucket: str, key: str, how: Callable[[bytes], bytes]) -> None:  # noqa: F811
    client = s3.client()
    data = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    client.put_object(Bucket=bucket, Key=key, Body=how(data))


def _stored(s3: S3Server, bucket: str) -> list[str]:  # noqa: F811
    return sorted(k.rsplit("/", 1)[1] for k in s3.list_keys(bucket) if k.endswith(".pt"))


OPTIONS: dict[str, Any] = {"keep_last": 1, "keep_best": 1, "monitor": "loss", "mode": "min"}


def _best_then_runner_up(m: RemoteCheckpointManager) -> None:
    """Step 1 (loss 0.1, the best) and step 2 (0.2, the runner-up)."""
    for step, loss in [(1, 0.1), (2, 0.2)]:
        m.save({"w": torch.full((64,), float(step))}, step=step, metrics={"loss": loss})


@pytest.mark.parametrize("how", [_truncate, _flip])
def test_damaged_stored_best_does_not_cost_the_readable_runner_up(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
    how: Callable[[bytes], bytes],
) -> None:
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/run/ckpt"
    with RemoteCheckpointManager(url, tmp_path / "a", **OPTIONS) as m:
        _best_then_runner_up(m)
    _damage(s3, bucket, "run/ckpt/ckpt-000001-step1.pt", how)
    # Another machine resumes (no local copies) and saves a worse checkpoint.
    warned = pytest.warns(UserWarning, match=rf"{url}/ckpt-000001-step1\.pt' cannot be read")
    with warned, RemoteCheckpointManager(url, tmp_path / "b", **OPTIONS) as m:
        m.save({"w": torch.full((64,), 3.0)}, step=3, metrics={"loss": 0.3})
    stored = _stored(s3, bucket)
    assert "ckpt-000002-step2.pt" in stored, f"the readable runner-up was deleted: {stored}"
    fresh = RemoteCheckpointManager(url, tmp_path / "c", monitor="loss")
    loaded = fresh.load({}, which="best")
    fresh.close()
    assert loaded.step == 2


def test_a_stored_best_damaged_while_its_local_copy_is_readable_is_uploaded_again(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/run/ckpt"
    with RemoteCheckpointManager(url, tmp_path / "a", **OPTIONS) as m:
        _best_then_runner_up(m)
        m.wait()
        _damage(s3, bucket, "run/ckpt/ckpt-000001-step1.pt", _truncate)
        with pytest.warns(UserWarning, match=r"ckpt-000001-step1\.pt.*uploaded again"):
            m.save({"w": torch.full((64,), 3.0)}, step=3, metrics={"loss": 0.3})
            m.wait()
    fresh = RemoteCheckpointManager(url, tmp_path / "c", monitor="loss")
    loaded = fresh.load({}, which="best")
    fresh.close()
    assert loaded.step == 1, f"a fresh machine's best is step {loaded.step}, not step 1"
    assert torch.equal(loaded.values["w"], torch.full((64,), 1.0))
