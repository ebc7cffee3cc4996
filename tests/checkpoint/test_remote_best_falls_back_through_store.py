"""``which="best"`` whose best checkpoint on the store is damaged falls back through the
ranking, local copies and stored checkpoints alike, with one warning naming the file
skipped and why, and ``best_path`` names the checkpoint that load picks; real S3 (moto)."""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from tests.tracking.s3_helpers import S3Server, s3, s3_server  # noqa: F401  (fixtures)

from scramjet.checkpoint.remote import RemoteCheckpointManager


def _second_machine_with_a_damaged_stored_best(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> RemoteCheckpointManager:
    """Steps 1, 2, 3 (losses 0.1, 0.2, 0.9) on the store, step 1 truncated there, and a
    second machine's manager holding a local copy of the worst (step 3) only."""
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/run/ckpt"
    losses = {1: 0.1, 2: 0.2, 3: 0.9}  # best step 1, next best step 2, step 3 the worst
    with RemoteCheckpointManager(url, tmp_path / "first", monitor="loss") as m:
        for step, loss in losses.items():
            m.save({"w": torch.full((4,), float(step))}, step=step, metrics={"loss": loss})
    key = "run/ckpt/ckpt-000001-step1.pt"
    body = s3.client().get_object(Bucket=bucket, Key=key)["Body"].read()
    s3.client().put_object(Bucket=bucket, Key=key, Body=body[: len(body) // 2])  # truncated
    # A second machine holds a copy of the worst checkpoint only (it resumed from latest).
    second = RemoteCheckpointManager(url, tmp_path / "second", monitor="loss")
    assert second.load({}, which="latest").step == 3
    return second


def test_a_damaged_best_on_the_store_falls_back_to_the_next_best_stored(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    second = _second_machine_with_a_damaged_stored_best(s3, tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = second.load({}, which="best")
    assert (result.step, result.metrics["loss"]) == (2, 0.2)
    assert torch.equal(result.values["w"], torch.full((4,), 2.0))
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1, messages
    assert "ckpt-000001-step1.pt" in messages[0] and "cannot be read" in messages[0]
    assert "next best" in messages[0]
    second.close()


def test_best_path_skips_a_damaged_stored_best_like_load_does(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    second = _second_machine_with_a_damaged_stored_best(s3, tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        best = second.best_path
    assert best is not None and best.name == "ckpt-000002-step2.pt"
    assert any("ckpt-000001-step1.pt" in str(w.message) for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert second.load({}, which="best").path == best
    second.close()


def test_best_path_downloads_an_intact_stored_best(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/run/ckpt"
    with RemoteCheckpointManager(url, tmp_path / "first", monitor="loss") as m:
        for step, loss in {1: 0.5, 2: 0.1, 3: 0.9}.items():
            m.save({"w": torch.full((2,), float(step))}, step=step, metrics={"loss": loss})
    with RemoteCheckpointManager(url, tmp_path / "second", monitor="loss") as second:
        best = second.best_path
        assert best is not None and best.name == "ckpt-000002-step2.pt" and best.is_file()
        assert best.parent == tmp_path / "second"
