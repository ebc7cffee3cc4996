"""CheckpointManager: round trips, restarts, rotation, scopes, strictness, corruption."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from scramjet.checkpoint import (
    CheckpointManager,
    CheckpointMismatchError,
    CorruptCheckpointError,
    read_checkpoint,
)


class Net(nn.Module):
    def __init__(self, hidden: int = 8, extra: bool = False) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.head = nn.Linear(hidden, 3)
        if extra:
            self.extra = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


def train_objects(
    seed: int = 0,
) -> tuple[Net, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    torch.manual_seed(seed)
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    loss = model(torch.randn(5, 4)).square().mean()
    loss.backward()
    opt.step()
    sched.step()
    return model, opt, sched


def same_params(a: nn.Module, b: nn.Module, prefix: str = "") -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return all(torch.equal(sa[k], sb[k]) for k in sa if k.startswith(prefix))


def names(manager: CheckpointManager) -> list[str]:
    return [c.path.name for c in manager.checkpoints()]


def test_round_trip_restores_objects_and_returns_plain_values(tmp_path: Path) -> None:
    model, opt, sched = train_objects(0)
    manager = CheckpointManager(tmp_path)
    values = {
        "tensor": torch.arange(4),
        "array": np.arange(6, dtype=np.float32).reshape(2, 3),
        "scalar": np.float64(2.5),
        "text": "hello",
        "nested": {"a": [1, (2, 3)], "b": None},
    }
    path = manager.save(
        {"model": model, "optimizer": opt, "scheduler": sched, **values},
        step=7,
        epoch=2,
        metrics={"loss": torch.tensor(0.25)},
    )
    assert path.name == "ckpt-000001-step7.pt"

    fresh, fresh_opt, fresh_sched = train_objects(1)
    assert not same_params(model, fresh)
    result = CheckpointManager(tmp_path).load(
        {"model": fresh, "optimizer": fresh_opt, "scheduler": fresh_sched}
    )
    assert same_params(model, fresh)
    assert fresh_sched.state_dict() == sched.state_dict()
    exp_avg = opt.state_dict()["state"][0]["exp_avg"]
    assert torch.equal(fresh_opt.state_dict()["state"][0]["exp_avg"], exp_avg)
    assert (result.step, result.epoch, result.metrics) == (7, 2, {"loss": 0.25})
    assert result.clean and result.path == path
    assert set(result.values) == set(values)
    assert torch.equal(result.values["tensor"], values["tensor"])
    assert isinstance(result.values["array"], np.ndarray)
    np.testing.assert_array_equal(result.values["array"], values["array"])
    assert result.values["scalar"] == 2.5 and isinstance(result.values["scalar"], float)
    assert result.values["text"] == "hello"
    assert result.values["nested"] == {"a": [1, (2, 3)], "b": None}


def test_files_load_with_plain_weights_only_torch_load(tmp_path: Path) -> None:
    model, opt, _ = train_objects()
    manager = CheckpointManager(tmp_path)
    path = manager.save({"model": model, "optimizer": opt, "rng": torch.get_rng_state()}, step=1)
    manager.wait()  # written in the background: on disk once wait() returns
    payload = torch.load(path, weights_only=True)
    assert payload["step"] == 1 and set(payload["state"]) == {"model", "optimizer", "rng"}


def test_unstorable_values_are_rejected_with_their_key(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path)
    with pytest.raises(TypeError, match=r"state\['fn'\].*function"):
        manager.save({"fn": lambda: 1}, step=1)
    with pytest.raises(TypeError, match="dtype=object"):
        manager.save({"arr": np.array([object()])}, step=1)
    with pytest.raises(ValueError, match="non-negative int"):
        manager.save({}, step=-1)
    with pytest.raises(TypeError, match="metric 'acc' must be a number"):
        manager.save({}, step=1, metrics={"acc": "high"})
    assert manager.checkpoints() == []


def test_restarted_manager_keeps_files_and_continues_numbering(tmp_path: Path) -> None:
    first = CheckpointManager(tmp_path, keep_last=None)
    for step in (10, 20, 30):
        first.save({"step_value": step}, step=step)
    before = {p.name: p.read_bytes() for p in tmp_path.glob("ckpt-*.pt")}

    second = CheckpointManager(tmp_path, keep_last=None)
    # Resuming from an earlier step and saving the same step numbers again never
    # overwrites: the sequence number keeps growing.
    new = second.save({"step_value": 20}, step=20)
    assert new.name == "ckpt-000004-step20.pt"
    for name, data in before.items():
        assert (tmp_path / name).read_bytes() == data
    assert second.latest_path == new
    assert [c.step for c in second.checkpoints()] == [10, 20, 30, 20]


def test_latest_ignores_modification_times(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_last=None)
    old = manager.save({"v": 1}, step=1)
    new = manager.save({"v": 2}, step=2)
    manager.wait()  # the files exist once the background write is done
    future = new.stat().st_mtime + 10_000
    os.utime(old, (future, future))
    assert manager.latest_path == new
    assert manager.load().values["v"] == 2


def test_keep_last_rotation_survives_restarts(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_last=2)
    for step in range(1, 4):
        manager.save({"v": step}, step=step)
    assert names(manager) == ["ckpt-000002-step2.pt", "ckpt-000003-step3.pt"]
    restarted = CheckpointManager(tmp_path, keep_last=2)
    restarted.save({"v": 4}, step=4)
    assert names(restarted) == ["ckpt-000003-step3.pt", "ckpt-000004-step4.pt"]
    index = json.loads((tmp_path / "index.json").read_text())
    assert index["latest"] == "ckpt-000004-step4.pt"
    assert [e["file"] for e in index["checkpoints"]] == names(restarted)


@pytest.mark.parametrize(
    ("mode", "kept_best"),
    [
        ("min", {"ckpt-000002-step2.pt", "ckpt-000004-step4.pt"}),
        # max: step 1 (0.9) stays, it was among the two best when step 2 came along.
        ("max", {"ckpt-000001-step1.pt", "ckpt-000003-step3.pt"}),
    ],
)
def test_keep_best_rotation(tmp_path: Path, mode: str, kept_best: set[str]) -> None:
    losses = [0.9, 0.2, 0.95, 0.1, 0.7, 0.8]
    manager = CheckpointManager(tmp_path, keep_last=1, keep_best=2, monitor="loss", mode=mode)  # type: ignore[arg-type]
    for step, loss in enumerate(losses, start=1):
        manager.save({"v": step}, step=step, metrics={"loss": loss})
    assert set(names(manager)) == kept_best | {"ckpt-000006-step6.pt"}
    best = "ckpt-000004-step4.pt" if mode == "min" else "ckpt-000003-step3.pt"
    assert manager.best_path == tmp_path / best
    assert manager.load(which="best").values["v"] == int(best.split("step")[1][:-3])
    # A new process ranks the same files the same way.
    assert (
        CheckpointManager(tmp_path, keep_last=1, keep_best=2, monitor="loss", mode=mode).best_path
        == tmp_path / best
    )  # type: ignore[arg-type]


def test_a_manager_opened_to_load_the_best_ranks_by_the_folders_recorded_metric(
    tmp_path: Path,
) -> None:
    writer = CheckpointManager(tmp_path, keep_last=None, monitor="acc", mode="max")
    for step, acc in enumerate([0.5, 0.9, 0.7], start=1):
        writer.save({"v": step}, step=step, metrics={"acc": acc})
    reader = CheckpointManager(tmp_path)  # no monitor: it said "which='best' needs monitor"
    assert reader.best_path == tmp_path / "ckpt-000002-step2.pt"
    assert reader.load(which="best").values["v"] == 2
    (tmp_path / "index.json").unlink()  # nothing recorded: the error says what to pass
    with pytest.raises(ValueError, match=r"monitor='<metric name>', mode='min'"):
        CheckpointManager(tmp_path).load(which="best")


def test_metadata_is_recovered_when_the_index_is_lost(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, monitor="acc", mode="max", keep_last=None)
    manager.save({"v": 1}, step=5, epoch=0, metrics={"acc": 0.5})
    manager.save({"v": 2}, step=9, epoch=1, metrics={"acc": 0.4})
    (tmp_path / "index.json").unlink()
    fresh = CheckpointManager(tmp_path, monitor="acc", mode="max")
    infos = fresh.checkpoints()
    assert [(c.step, c.epoch, c.metrics) for c in infos] == [
        (5, 0, {"acc": 0.5}),
        (9, 1, {"acc": 0.4}),
    ]
    assert fresh.best_path == infos[0].path


def test_stale_temporary_files_are_ignored_then_removed_by_the_writer(tmp_path: Path) -> None:
    CheckpointManager(tmp_path).save({"v": 1}, step=1)
    stale = tmp_path / ".tmp-ckpt-000002-step2.pt.123.abcd"
    stale.write_bytes(b"half a checkpoint")
    manager = CheckpointManager(tmp_path)
    assert manager.load().step == 1 and len(manager.checkpoints()) == 1
    assert stale.exists()  # readers never delete: the writer may still be writing it
    manager.save({"v": 2}, step=2)
    assert not stale.exists()


def test_scope_loads_only_the_submodule(tmp_path: Path) -> None:
    source, source_opt, _ = train_objects(0)
    manager = CheckpointManager(tmp_path)
    manager.save({"model": source, "optimizer": source_opt}, step=1)
    target, target_opt, _ = train_objects(1)
    head_before = {k: v.clone() for k, v in target.head.state_dict().items()}
    opt_before = target_opt.state_dict()["state"][0]["exp_avg"].clone()

    result = manager.load({"model": target, "optimizer": target_opt}, scope="encoder")
    assert same_params(source, target, "encoder.")
    assert all(torch.equal(target.head.state_dict()[k], v) for k, v in head_before.items())
    assert torch.equal(target_opt.state_dict()["state"][0]["exp_avg"], opt_before)
    assert result.clean

    with pytest.raises(
        CheckpointMismatchError, match=r"no keys under scope 'decoder'.*encoder, head"
    ):
        manager.load({"model": target}, scope="decoder")


def test_strict_false_loads_matching_keys_and_reports_the_rest(tmp_path: Path) -> None:
    source, _, _ = train_objects(0)
    manager = CheckpointManager(tmp_path)
    manager.save({"model": source}, step=3)
    target = Net(extra=True)
    target.head = nn.Linear(8, 5)  # different shape than saved (3 outputs)
    with pytest.warns(UserWarning, match="strict=False"):
        result = manager.load({"model": target, "ema": Net()}, strict=False)
    assert same_params(source, target, "encoder.")
    assert result.missing_keys == {
        "model": ["extra.weight", "extra.bias"],
        "ema": ["<whole entry>"],
    }
    assert result.unexpected_keys == {}
    assert result.mismatched_keys == {
        "model": ["head.weight: (3, 8) -> (5, 8)", "head.bias: (3,) -> (5,)"]
    }
    assert not result.clean


def test_wrong_model_error_lists_missing_and_unexpected_keys(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path)
    manager.save({"model": nn.Sequential(nn.Linear(4, 2))}, step=1)
    with pytest.raises(CheckpointMismatchError) as info:
        manager.load({"model": Net()})
    text = str(info.value)
    assert "missing keys (6): encoder.0.weight, encoder.0.bias" in text
    assert "unexpected keys (2): 0.weight, 0.bias" in text
    assert "strict=False" in text
    with pytest.raises(CheckpointMismatchError, match=r"no entry 'optimizer'.*it has: model"):
        manager.load({"optimizer": torch.optim.SGD(Net().parameters(), lr=0.1)})


def test_wrapped_modules_are_saved_and_loaded_unwrapped(tmp_path: Path) -> None:
    model, _, _ = train_objects(0)
    manager = CheckpointManager(tmp_path)
    manager.save({"model": nn.DataParallel(model)}, step=1)
    plain = Net()
    manager.load({"model": plain})
    assert same_params(model, plain)
    wrapped = nn.DataParallel(Net())
    manager.load({"model": wrapped})
    assert same_params(model, wrapped.module)


def corrupt(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_corrupt_latest_is_named_and_falls_back(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path)
    manager.save({"v": 1}, step=1)
    good = manager.save({"v": 2}, step=2)
    bad = manager.save({"v": 3}, step=3)
    manager.wait()
    corrupt(bad)
    with pytest.raises(CorruptCheckpointError, match=bad.name):
        manager.load(fallback=False)
    with pytest.raises(CorruptCheckpointError, match=bad.name):
        manager.load(which=bad)  # explicit paths never fall back
    with pytest.warns(UserWarning, match=rf"{bad.name}.*trying the previous checkpoint"):
        result = manager.load()
    assert result.path == good and result.values["v"] == 2


def test_all_corrupt_raises_listing_every_file(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path)
    paths = [manager.save({"v": i}, step=i) for i in (1, 2)]
    manager.wait()
    for p in paths:
        corrupt(p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(CorruptCheckpointError) as info:
            manager.load()
    assert all(p.name in str(info.value) for p in paths)


def test_foreign_file_is_rejected(tmp_path: Path) -> None:
    other = tmp_path / "plain.pt"
    torch.save(Net().state_dict(), other)
    with pytest.raises(CorruptCheckpointError, match="not a scramjet checkpoint"):
        read_checkpoint(other)


def test_empty_directory_and_bad_options(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path / "new" / "dir")
    assert manager.latest_path is None and manager.best_path is None
    with pytest.raises(FileNotFoundError, match="latest_path is not None"):
        manager.load()
    with pytest.raises(ValueError, match="monitor"):
        manager.load(which="best")
    with pytest.raises(ValueError, match="keep_best=2 needs monitor"):
        CheckpointManager(tmp_path, keep_best=2)
    with pytest.raises(ValueError, match="keep_last must be a positive int"):
        CheckpointManager(tmp_path, keep_last=0)
    with pytest.raises(ValueError, match="mode must be 'min' or 'max'"):
        CheckpointManager(tmp_path, mode="lowest")  # type: ignore[arg-type]
