"""``save()`` never writes a file that ``load()`` refuses.

Values that ``torch.load(weights_only=True)`` would not rebuild were written without a
word and every later load called the file damaged, so a resume fell back past them or
lost the run: dict keys that are numpy scalars (``collections.Counter(labels.numpy())``,
a dict from ``np.unique``) or Enum members, frozensets, numpy datetime64 scalars. Now the
storable ones come back (keys as Python values, a frozenset as a frozenset) and the
others raise ``TypeError`` naming the key and the conversion, before any file exists.
"""

from __future__ import annotations

import collections
import enum
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from scramjet import Trainer
from scramjet.callbacks import SaveTrainingStateCallback, TrainerCallback
from scramjet.checkpoint import CheckpointManager, read_checkpoint, write_checkpoint

LABELS = np.array([0, 1, 1, 2, 2, 2])


class Split(enum.Enum):
    TRAIN = "train"


class Colour(str, enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Tagged(torch.Tensor):
    pass


Pair = collections.namedtuple("Pair", "a b")

# value saved -> value and key/item types that come back
STORED: dict[str, tuple[Any, Any]] = {
    "Counter over a numpy array": (collections.Counter(LABELS), {0: 1, 1: 2, 2: 3}),
    "dict from np.unique": (dict(zip(*np.unique(LABELS, return_counts=True))), {0: 1, 1: 2, 2: 3}),
    "numpy float and bool keys": ({np.float32(0.5): 1, np.bool_(True): 2}, {0.5: 1, True: 2}),
    "tuple keys of numpy scalars": ({(np.int64(1), "a"): [np.int8(3)]}, {(1, "a"): [3]}),
    "named tuple key": ({Pair(1, 2): 3}, {(1, 2): 3}),
    "str and int enum keys": ({Colour.RED: 1, Level.HIGH: 2}, {"red": 1, 3: 2}),
    "str and int enum values": ([Colour.RED, Level.HIGH], ["red", 3]),
    "frozenset": (frozenset({"l1", "l2"}), frozenset({"l1", "l2"})),
    "frozenset of numpy ints": (frozenset(LABELS), frozenset({0, 1, 2})),
    "set of numpy ints": (set(LABELS), {0, 1, 2}),
    "nested": ({"a": {np.int32(7): frozenset({(1, 2)})}}, {"a": {7: frozenset({(1, 2)})}}),
}


def _plain_types(value: Any) -> bool:
    """Every key, item and value is of a built-in type (no numpy scalar, no enum)."""
    if isinstance(value, dict):
        return all(_plain_types(k) and _plain_types(v) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return all(_plain_types(v) for v in value)
    return type(value) in (bool, int, float, str)


@pytest.mark.parametrize("async_write", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", list(STORED))
def test_storable_values_come_back(tmp_path: Path, name: str, async_write: bool) -> None:
    value, expected = STORED[name]
    with CheckpointManager(tmp_path, async_write=async_write) as manager:
        manager.save({"model": nn.Linear(2, 1), "extra": value}, step=3)
        result = manager.load({"model": nn.Linear(2, 1)}, fallback=False)
    back = result.values["extra"]
    assert back == expected
    assert type(back) is type(expected)
    assert _plain_types(back)
    # the file itself is read by torch.load(weights_only=True), as any reader does
    assert read_checkpoint(result.path)["step"] == 3


REFUSED: dict[str, tuple[Any, str]] = {
    "Enum key": ({Split.TRAIN: 0.5}, r"state\['extra'\] \(a key\).*enum member.*Split\(value\)"),
    "Enum value": ([Split.TRAIN], r"state\['extra'\]\[0\].*enum member.*its value \('train'\)"),
    "datetime64": (np.datetime64("2024-01-01"), r"numpy datetime64 scalar.*str\(value\)"),
    "datetime64 in ns": (np.datetime64("2024-01-01T00:00:00.000000000"), r"datetime64.*'ns'"),
    "timedelta64": ({"t": np.timedelta64(3, "s")}, r"state\['extra'\]\['t'\].*timedelta64"),
    "longdouble": (np.longdouble(1.5), r"no Python equivalent.*float\(value\)"),
    "frozenset key": ({frozenset({1}): 1}, r"key frozenset.*tuple\(sorted\(s\)\)"),
    "tensor subclass": (torch.zeros(2).as_subclass(Tagged), r"subclass .*Tagged.*as_subclass"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_unloadable_values_are_refused_before_a_file_is_written(tmp_path: Path, name: str) -> None:
    value, message = REFUSED[name]
    with CheckpointManager(tmp_path, async_write=False) as manager:
        manager.save({"model": nn.Linear(2, 1)}, step=0)
        with pytest.raises(TypeError, match=message):
            manager.save({"model": nn.Linear(2, 1), "extra": value}, step=1)
        assert [c.step for c in manager.checkpoints()] == [0]
        assert manager.load({"model": nn.Linear(2, 1)}).step == 0
    with pytest.raises(TypeError, match=message):
        write_checkpoint(tmp_path / "one.pt", {"extra": value})
    assert not (tmp_path / "one.pt").exists()


def test_a_str_enum_entry_name_is_stored_as_its_value(tmp_path: Path) -> None:
    with CheckpointManager(tmp_path, async_write=False) as manager:
        manager.save({Colour.RED: torch.ones(2)}, step=0)
        result = manager.load()
    assert list(result.values) == ["red"]
    assert type(next(iter(result.values))) is str


class ClassCounts(TrainerCallback):
    """Per-class counts keyed by numpy labels, and the layers it keeps frozen."""

    def __init__(self) -> None:
        self.counts: collections.Counter[Any] = collections.Counter()
        self.frozen = frozenset({"encoder"})

    def on_train_step_end(self, trainer: Any, batch: Any, batch_output: Any, **kw: Any) -> None:
        self.counts.update(batch[1].argmax(1).numpy())  # np.int64 keys

    def state_dict(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "frozen": self.frozen}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.counts = collections.Counter(state["counts"])
        self.frozen = state["frozen"]


def _trainer(folder: Path) -> tuple[Trainer, ClassCounts]:
    torch.manual_seed(0)
    model = nn.Linear(2, 3)
    counts = ClassCounts()
    trainer = Trainer(
        model,
        nn.MSELoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[counts, SaveTrainingStateCallback(folder, every_n_steps=2)],
        seed=0,
    )
    return trainer, counts


def test_a_run_whose_callback_counts_numpy_labels_resumes(tmp_path: Path) -> None:
    data = torch.utils.data.TensorDataset(torch.randn(32, 2), torch.randn(32, 3))
    trainer, counts = _trainer(tmp_path)
    trainer.train(data, num_epochs=1, per_device_batch_size=8)
    saved = dict(counts.counts)
    assert sum(saved.values()) == 32
    trainer, counts = _trainer(tmp_path)
    trainer.train(data, num_epochs=1, per_device_batch_size=8, resume_from=tmp_path)
    assert trainer.state.global_step == 4
    assert dict(counts.counts) == {int(k): v for k, v in saved.items()}
    assert counts.frozen == frozenset({"encoder"})
    assert type(counts.frozen) is frozenset


def test_tensor_keys_round_trip(tmp_path: Path) -> None:
    # they did before the value rules, and the loader rebuilds them
    write_checkpoint(tmp_path / "k.pt", {"extra": {torch.tensor(1): 2.0, torch.tensor(3): 4.0}})
    extra = read_checkpoint(tmp_path / "k.pt")["state"]["extra"]
    assert sorted((int(k), v) for k, v in extra.items()) == [(1, 2.0), (3, 4.0)]
