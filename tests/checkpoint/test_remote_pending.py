"""Remote checkpoints: what rotation keeps on the store, and what a new process does with
local copies that an earlier process saved but could not upload (moto S3 on 127.0.0.1).
"""

from __future__ import annotations

import gc
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.tracking.s3_helpers import S3Server, s3, s3_server  # noqa: F401  (fixtures)
from torch import nn

from scramjet import Trainer
from scramjet.callbacks import SaveTrainingStateCallback, TrainerCallback
from scramjet.checkpoint.remote import RemoteCheckpointManager, load_remote

pytestmark = pytest.mark.filterwarnings("ignore:.*could not prepare.*")

# No retries inside botocore (nor s3fs, see fast_failures): an upload to a stopped server
# fails at once.
FAST = {"config_kwargs": {"retries": {"max_attempts": 1}}}


@pytest.fixture(autouse=True)
def fast_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    import s3fs

    monkeypatch.setattr(s3fs.S3FileSystem, "retries", 1)


def remote_names(server: S3Server, bucket: str) -> list[str]:
    return sorted(k.rsplit("/", 1)[-1] for k in server.list_keys(bucket) if "/ckpt-" in k)


def local_names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("ckpt-*.pt"))


def test_remote_rotation_keeps_the_best_checkpoint(s3: S3Server, tmp_path: Path) -> None:  # noqa: F811
    bucket = s3.new_bucket()
    manager = RemoteCheckpointManager(
        f"s3://{bucket}/ckpt", tmp_path, keep_last=2, keep_best=1, monitor="val_loss"
    )
    for step, loss in enumerate([0.5, 0.1, 0.4, 0.3, 0.35]):
        manager.save({"w": torch.full((2,), float(step))}, step=step, metrics={"val_loss": loss})
    manager.close()
    want = ["ckpt-000002-step1.pt", "ckpt-000004-step3.pt", "ckpt-000005-step4.pt"]
    assert local_names(tmp_path) == want
    assert remote_names(s3, bucket) == want  # the best (step 1) is not deleted remotely


def _crash_during_outage(server: S3Server, folder: Path) -> tuple[str, str]:
    """In a new bucket: save step 1 (uploaded), then step 2 while the store is down, then
    'die' (the manager is dropped without close()); the store comes back. Returns the
    bucket and the checkpoint folder's URL."""
    bucket = server.new_bucket()
    url = f"s3://{bucket}/ckpt"
    manager = RemoteCheckpointManager(
        url, folder, keep_last=1, upload_attempts=1, storage_options=FAST
    )
    manager.save({"w": torch.full((3,), 1.0)}, step=1)
    manager.wait()
    server.stop()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            manager.save({"w": torch.full((3,), 2.0)}, step=2)
            manager.wait()
        del manager
        gc.collect()
    finally:
        server.start()
    return bucket, url


def test_a_new_process_uploads_what_an_earlier_one_could_not(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    bucket, url = _crash_during_outage(s3, tmp_path)
    assert local_names(tmp_path) == ["ckpt-000002-step2.pt"]
    assert remote_names(s3, bucket) == ["ckpt-000001-step1.pt"]

    with pytest.warns(RuntimeWarning, match="not uploaded.*ckpt-000002-step2.pt"):
        manager = RemoteCheckpointManager(url, tmp_path, keep_last=None)
    manager.save({"w": torch.full((3,), 3.0)}, step=3)
    manager.close()
    assert remote_names(s3, bucket) == [
        "ckpt-000001-step1.pt",
        "ckpt-000002-step2.pt",
        "ckpt-000003-step3.pt",
    ]


def test_local_copies_not_uploaded_by_an_earlier_process_are_never_rotated_away(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    bucket, url = _crash_during_outage(s3, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        manager = RemoteCheckpointManager(url, tmp_path, keep_last=1, storage_options=FAST)
    manager.save({"w": torch.full((3,), 3.0)}, step=3)
    manager.wait()
    # keep_last=1 rotates before the upload; step 2 was not uploaded then: it stays
    assert local_names(tmp_path) == ["ckpt-000002-step2.pt", "ckpt-000003-step3.pt"]
    assert remote_names(s3, bucket) == ["ckpt-000003-step3.pt"]  # 1 and 2 rotated remotely
    manager.save({"w": torch.full((3,), 4.0)}, step=4)  # uploaded: now rotated locally too
    manager.close()
    assert local_names(tmp_path) == ["ckpt-000004-step4.pt"]
    assert remote_names(s3, bucket) == ["ckpt-000004-step4.pt"]


def test_load_remote_prefers_a_newer_local_copy_that_was_not_uploaded(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    _, url = _crash_during_outage(s3, tmp_path)
    with pytest.warns(UserWarning, match="ckpt-000002-step2.pt.*not uploaded"):
        result = load_remote(url, {}, local_dir=tmp_path)
    assert result.step == 2 and torch.equal(result.values["w"], torch.full((3,), 2.0))
    # A damaged local copy is skipped for the newest remote one.
    data = bytearray((tmp_path / "ckpt-000002-step2.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / "ckpt-000002-step2.pt").write_bytes(bytes(data))
    with (
        pytest.warns(UserWarning, match="trying the previous checkpoint s3://"),
        pytest.warns(UserWarning, match="ckpt-000002-step2.pt.*not uploaded"),
    ):
        result = load_remote(url, {}, local_dir=tmp_path)
    assert result.step == 1


class _CrashAt(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.global_step == self.step:
            raise RuntimeError("crashed on purpose")


class _StartedAt(TrainerCallback):
    step = -1

    def on_training_run_start(self, trainer: Any, **kwargs: Any) -> None:
        self.step = trainer.state.global_step


def test_resume_auto_continues_from_a_checkpoint_that_was_never_uploaded(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/run/ckpt"
    g = torch.Generator().manual_seed(0)
    data = [(torch.randn(4, generator=g), torch.tensor(i % 2)) for i in range(32)]

    def build(location: str | Path, *extra: TrainerCallback) -> Trainer:
        torch.manual_seed(0)
        model = nn.Linear(4, 2)
        saver = SaveTrainingStateCallback(
            location, every_n_steps=2, every_n_epochs=None, local_dir=tmp_path
        )
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        return Trainer(model, nn.CrossEntropyLoss(), optimizer, seed=0, callbacks=[saver, *extra])

    # What a process leaves behind when it dies after saving step 2 and before its upload:
    # the checkpoint in the local folder, nothing on the store.
    with pytest.raises(RuntimeError, match="on purpose"):
        build(tmp_path, _CrashAt(3)).train(data, num_epochs=1, per_device_batch_size=4)
    assert local_names(tmp_path) == ["ckpt-000001-step2.pt"]
    assert remote_names(s3, bucket) == []

    started = _StartedAt()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build(url, started).train(data, num_epochs=1, per_device_batch_size=4, resume_from="auto")
    assert started.step == 2  # not a fresh start that drops the saved progress
