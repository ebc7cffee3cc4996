"""``index.json``'s ``"best"`` never names a damaged checkpoint after a save: a best file
truncated or bit-flipped on disk gives its place to the best intact one by the recorded
metric (with a warning naming it), and ``load(which="best")`` loads that one."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from scramjet.checkpoint import CheckpointManager, CorruptCheckpointError


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _flip_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 8] = bytes(b ^ 0xFF for b in data[middle : middle + 8])
    path.write_bytes(bytes(data))


def _index_best(folder: Path) -> str | None:
    best: str | None = json.loads((folder / "index.json").read_text(encoding="utf-8"))["best"]
    return best


def _save_losses(manager: CheckpointManager, losses: list[float], first_step: int = 1) -> None:
    for step, loss in enumerate(losses, start=first_step):
        manager.save({"w": torch.full((64,), float(step))}, step=step, metrics={"loss": loss})
    manager.wait()


@pytest.mark.parametrize("damage", [_truncate, _flip_bytes], ids=["truncated", "flipped"])
def test_next_save_after_a_restart_names_the_best_intact_file(
    tmp_path: Path, damage: Callable[[Path], None]
) -> None:
    _save_losses(CheckpointManager(tmp_path, keep_last=None, monitor="loss"), [0.1, 0.2, 0.9])
    assert _index_best(tmp_path) == "ckpt-000001-step1.pt"
    damage(tmp_path / "ckpt-000001-step1.pt")
    restarted = CheckpointManager(tmp_path, keep_last=None, monitor="loss")
    with pytest.warns(UserWarning, match=r"ckpt-000001-step1\.pt.*cannot be read.*loss=0\.1"):
        _save_losses(restarted, [0.5], first_step=4)
    assert _index_best(tmp_path) == "ckpt-000002-step2.pt"
    with pytest.warns(UserWarning, match=r"ckpt-000001-step1\.pt.*cannot be read"):
        loaded = restarted.load({"w": None}, which="best")
    assert loaded.path.name == _index_best(tmp_path)
    assert torch.equal(loaded.values["w"], torch.full((64,), 2.0))


def test_same_manager_truncated_best_leaves_the_index_at_its_next_save(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_last=None, monitor="loss")  # background writes
    _save_losses(manager, [0.1, 0.2, 0.9])
    _truncate(tmp_path / "ckpt-000001-step1.pt")
    with pytest.warns(UserWarning, match=r'ckpt-000001-step1\.pt.*no longer names it as "best"'):
        _save_losses(manager, [0.5], first_step=4)
    assert _index_best(tmp_path) == "ckpt-000002-step2.pt"
    with pytest.warns(UserWarning, match="trying the next best"):  # best_path checks too
        assert manager.best_path == tmp_path / "ckpt-000002-step2.pt"
    with warnings.catch_warnings():  # warned once per damaged file, not at every save
        warnings.simplefilter("error")
        _save_losses(manager, [0.6], first_step=5)
    assert _index_best(tmp_path) == "ckpt-000002-step2.pt"


def test_best_is_recomputed_from_the_recorded_metric_not_the_newest(tmp_path: Path) -> None:
    manager = CheckpointManager(
        tmp_path, keep_last=None, monitor="acc", mode="max", async_write=False
    )
    for step, acc in enumerate([0.9, 0.7, 0.8], start=1):
        manager.save({"w": torch.full((8,), float(step))}, step=step, metrics={"acc": acc})
    _flip_bytes(tmp_path / "ckpt-000001-step1.pt")
    restarted = CheckpointManager(tmp_path, keep_last=None, monitor="acc", mode="max")
    with pytest.warns(UserWarning, match=r"ckpt-000001-step1\.pt.*acc=0\.9"):
        restarted.save({"w": torch.full((8,), 4.0)}, step=4, metrics={"acc": 0.1})
        restarted.wait()
    assert _index_best(tmp_path) == "ckpt-000003-step3.pt"  # 0.8: the best intact one


def test_a_manager_without_monitor_keeps_the_index_best_intact(tmp_path: Path) -> None:
    _save_losses(CheckpointManager(tmp_path, keep_last=None, monitor="loss"), [0.1, 0.2])
    _truncate(tmp_path / "ckpt-000001-step1.pt")
    later = CheckpointManager(tmp_path, keep_last=None)  # ranks by what the index records
    with pytest.warns(UserWarning, match=r"ckpt-000001-step1\.pt"):
        _save_losses(later, [0.3], first_step=3)
    assert _index_best(tmp_path) == "ckpt-000002-step2.pt"


def test_no_intact_ranked_file_leaves_best_null_and_load_best_says_why(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_last=None, monitor="loss", async_write=False)
    _save_losses(manager, [0.1, 0.2])
    for name in ("ckpt-000001-step1.pt", "ckpt-000002-step2.pt"):
        _truncate(tmp_path / name)
    restarted = CheckpointManager(tmp_path, keep_last=None, monitor="loss", async_write=False)
    with pytest.warns(UserWarning, match="cannot be read"):
        restarted.save({"w": torch.zeros(64)}, step=3)  # no metric: it does not rank
    assert _index_best(tmp_path) is None
    with (
        pytest.warns(UserWarning, match="trying the next best"),
        pytest.raises(CorruptCheckpointError, match=r"step1\.pt.*step2\.pt.*damaged"),
    ):
        restarted.load({"w": None}, which="best")
    restarted.save({"w": torch.ones(64)}, step=4, metrics={"loss": 0.7})
    assert _index_best(tmp_path) == "ckpt-000004-step4.pt"  # worse, but intact


def test_intact_folder_names_its_best_without_warning(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        manager = CheckpointManager(tmp_path, keep_last=None, monitor="loss")
        _save_losses(manager, [0.4, 0.1, 0.3])
        _save_losses(CheckpointManager(tmp_path, keep_last=None, monitor="loss"), [0.2], 4)
    assert _index_best(tmp_path) == "ckpt-000002-step2.pt"
