"""log_results given a result package object instead of its numbers: its text was written
in place of them (``"<...ClassificationResults object at 0x...>"``), silently, so
``list_runs``, ``scramjet runs`` and the report found nothing. A prepared AIToolbox package
is now written as its results; anything else that is not a mapping is refused, saying how
to get the numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from scramjet.compat.aitoolbox import ClassificationResultPackage
from scramjet.metrics import ClassificationResults
from scramjet.tracking import Experiment, list_runs


def test_a_package_object_is_refused_or_written_as_its_results(tmp_path: Path) -> None:
    exp = Experiment("p", "e", root=tmp_path, checkpoint=None)
    exp.start()
    y = torch.tensor([0, 1, 1, 0, 1, 0, 1, 1])
    pred = torch.tensor([0, 1, 0, 0, 1, 1, 1, 1])
    package = ClassificationResults(num_classes=2)
    with pytest.raises(
        TypeError, match=r"must be a dict.*received ClassificationResults.*evaluate"
    ):
        exp.log_results("test", package)
    assert not (exp.run_dir / "results" / "test.json").exists()
    exp.log_results("test", package(pred, y))  # what the package returns: written as is
    aitb = ClassificationResultPackage()
    aitb.prepare_result_package(y.numpy(), pred.numpy())
    path = exp.log_results("aitb", aitb)
    assert path is not None
    written = json.loads(path.read_text())
    assert written["Accuracy"] == pytest.approx(0.75)
    metrics = list_runs(tmp_path)[0]["metrics"]
    assert metrics["test/accuracy"] == pytest.approx(0.75)
    assert metrics["aitb/Accuracy"] == pytest.approx(0.75)
