"""``log_results`` writes each number with the precision it has: a float32 tensor's or
array's values as their shortest float32 decimal, float64 ones untouched."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from scramjet.tracking import Experiment


def _logged(root: Path, results: dict[str, object], predictions: object = None) -> Path:
    exp = Experiment("proj", "precision", root=root, checkpoint=None)
    exp.start()
    path = exp.log_results("test", results, predictions)
    exp.finish()
    assert path is not None
    return path


def test_float32_results_are_written_as_their_shortest_decimal(tmp_path: Path) -> None:
    results = {
        "accuracy": torch.tensor(0.3),
        "per_class": torch.tensor([0.1, 0.7, 0.3]),
        "f1": np.float32(0.3),
        "recall": np.array([0.2, 0.9], dtype=np.float32),
        "half": torch.tensor(0.1, dtype=torch.float16),
        "nested": {"mae": torch.tensor([[0.3]])},
    }
    path = _logged(tmp_path, results, predictions=torch.tensor([0.1, 0.2]))
    text = path.read_text()
    assert "0.30000001192092896" not in text and "0.10000000149011612" not in text
    data = json.loads(text)
    assert data["accuracy"] == 0.3 and data["f1"] == 0.3
    assert data["per_class"] == [0.1, 0.7, 0.3] and data["recall"] == [0.2, 0.9]
    assert data["half"] == 0.1 and data["nested"] == {"mae": [[0.3]]}
    for key in ("accuracy", "per_class", "f1", "recall"):  # the same value in float32
        back = np.asarray(data[key], dtype=np.float32)
        assert np.array_equal(back, np.asarray(results[key], dtype=np.float32))
    predictions = json.loads(path.with_name("test_predictions.json").read_text())
    assert predictions == [0.1, 0.2]


def test_float64_results_keep_every_digit(tmp_path: Path) -> None:
    value = 0.30000001192092896  # a float64 that is not 0.3
    data = json.loads(
        _logged(
            tmp_path,
            {"a": torch.tensor(value, dtype=torch.float64), "b": np.float64(value), "c": value},
        ).read_text()
    )
    assert data == {"a": value, "b": value, "c": value}
