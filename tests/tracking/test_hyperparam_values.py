"""Hyperparameters as users write them (config dataclasses, tensors, NumPy numbers, paths,
None, non-string keys) are recorded as comparable values, in hyperparams.json and in what
every logger receives."""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tracking_helpers import make_trainer, tiny_data

from scramjet.tracking import Experiment, Tracker


class Mode(enum.Enum):
    FAST = "fast"


@dataclasses.dataclass
class Optim:
    lr: float = 0.1
    betas: tuple[float, float] = (0.9, 0.99)


@dataclasses.dataclass
class Config:
    optim: Optim = dataclasses.field(default_factory=Optim)
    data: Path = Path("/data/train")
    note: str | None = None


class Params(Tracker):
    name = "params"

    def __init__(self) -> None:
        self.params: dict[str, Any] = {}

    def log_hyperparams(self, params: Mapping[str, Any]) -> None:
        self.params = dict(params)


def test_odd_hyperparameter_values_are_recorded_as_values(tmp_path: Path) -> None:
    hp = {
        "cfg": Config(),
        "warmup": torch.tensor(0.25),
        "class_weights": torch.tensor([1.0, 2.0, 0.5]),
        "embedding": torch.zeros(10, 10),
        "dropout": np.float32(0.5),
        "layers": np.array([16, 8]),
        "mode": Mode.FAST,
        "out": Path("/tmp/out"),
        "tags": {"b", "a"},
        "seed": None,
        3: "a key that is not a string",  # beside string keys: json's sort_keys failed
    }
    params = Params()
    exp = Experiment("p", "e", root=tmp_path, hyperparams=hp, loggers=(params,), checkpoint=None)
    hp["seed"] = 7  # changed after the Experiment was built: what was given is recorded
    make_trainer([exp]).train(tiny_data(), 1, per_device_batch_size=32)

    info = json.loads((exp.run_dir / "run.json").read_text())
    assert info["status"] == "finished"
    recorded = json.loads((exp.run_dir / "hyperparams.json").read_text())["hyperparams"]
    assert recorded == {
        "cfg": {"optim": {"lr": 0.1, "betas": [0.9, 0.99]}, "data": "/data/train", "note": None},
        "warmup": 0.25,
        "class_weights": [1.0, 2.0, 0.5],
        "embedding": "Tensor(shape=[10, 10], dtype=float32)",
        "dropout": 0.5,
        "layers": [16, 8],
        "mode": "fast",
        "out": "/tmp/out",
        "tags": ["a", "b"],
        "seed": None,
        "3": "a key that is not a string",
    }
    got = params.params
    assert got["cfg.optim.lr"] == 0.1 and got["cfg.data"] == "/data/train", "one name per field"
    assert got["warmup"] == 0.25 and got["dropout"] == 0.5 and got["3"] == recorded["3"]
    assert isinstance(got["dropout"], float)
    # a list of plain values and None reach the trackers as they are, anything else as text
    assert got["layers"] == [16, 8] and got["cfg.optim.betas"] == [0.9, 0.99]
    assert got["seed"] is None and got["cfg.note"] is None and got["tags"] == ["a", "b"]
    assert got["embedding"] == "Tensor(shape=[10, 10], dtype=float32)"


def test_settings_objects_are_taken_as_hyperparameters(tmp_path: Path) -> None:
    """A config dataclass, an argparse.Namespace or a Hugging Face config passed as the
    hyperparameters themselves is recorded field by field (it raised AttributeError)."""
    from transformers import BertConfig

    args = argparse.Namespace(lr=0.01, epochs=3, out=Path("/tmp/o"))
    assert Experiment("p", "ns", root=tmp_path, hyperparams=args).hyperparams == {
        "lr": 0.01,
        "epochs": 3,
        "out": "/tmp/o",
    }
    assert Experiment("p", "dc", root=tmp_path, hyperparams=Optim()).hyperparams == {
        "lr": 0.1,
        "betas": [0.9, 0.99],
    }
    config = BertConfig(vocab_size=32, hidden_size=16, num_hidden_layers=1)
    recorded = Experiment("p", "hf", root=tmp_path, hyperparams=config).hyperparams
    assert recorded["hidden_size"] == 16 and recorded["model_type"] == "bert"
    nested = Experiment("p", "n", root=tmp_path, hyperparams={"model": config, "args": args})
    assert nested.hyperparams["model"]["vocab_size"] == 32
    assert nested.hyperparams["args"]["epochs"] == 3
    with pytest.raises(TypeError, match=r"received list\. Pass a dict"):
        Experiment("p", "bad", root=tmp_path, hyperparams=[("lr", 0.1)])


def test_a_tuple_keeps_its_text_for_mlflow_and_tensorboard() -> None:
    # turned into a list, an MLflow param written as "(16, 8)" read "[16, 8]" on resume:
    # a changed param, a warning and a resumed.* tag for nothing
    from scramjet.tracking.loggers.base import flatten_params

    flat = flatten_params({"hidden": (16, 8), "layers": [16, 8], "cfg": {"betas": (0.9, 0.99)}})
    assert flat == {"hidden": (16, 8), "layers": [16, 8], "cfg.betas": (0.9, 0.99)}
    assert str(flat["hidden"]) == "(16, 8)" and str(flat["layers"]) == "[16, 8]"
