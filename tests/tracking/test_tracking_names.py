"""Names that become file or folder names in a run: results names, experiment names."""

from __future__ import annotations

from pathlib import Path

import pytest
from tracking_helpers import make_trainer, tiny_data

from scramjet.tracking import Experiment, list_runs


def _files(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Experiment:
    root = tmp_path_factory.mktemp("names") / "runs"
    exp = Experiment("names", "results", root=root, save_script=False)
    make_trainer([exp]).train(tiny_data(32), 1, per_device_batch_size=16)
    return exp


@pytest.mark.parametrize(
    "name",
    ["../../outside", "val/fold1", "", "..", "a" * 300],
    ids=["parent", "slash", "empty", "dotdot", "too-long"],
)
def test_log_results_refuses_a_name_that_is_not_one_file_of_results(
    finished: Experiment, name: str
) -> None:
    """``../../outside`` wrote ``outside.json`` two folders above ``results/`` (outside the
    run), ``val/fold1`` and a 300-character name failed with the raw OSError of a temporary
    file, and ``""`` wrote a hidden ``results/.json`` that ``list_runs`` read as
    ``.json/acc``."""
    root = finished.run_dir.parent.parent
    before = _files(root)
    with pytest.raises(ValueError, match="log_results") as info:
        finished.log_results(name, {"acc": 0.5})
    assert repr(name[:40]) in str(info.value) or name[:40] in str(info.value)
    assert _files(root) == before
    metrics = list_runs(root)[0]["metrics"]
    assert not any(key.startswith((".json", "outside")) for key in metrics), metrics


def test_log_results_keeps_a_unicode_name(finished: Experiment) -> None:
    path = finished.log_results("tést", {"acc": 0.75})
    assert path is not None and path.is_file() and path.parent == finished.run_dir / "results"
    assert list_runs(finished.run_dir)[0]["metrics"]["tést/acc"] == 0.75


def test_an_experiment_name_too_long_for_a_folder_is_refused_at_construction(
    tmp_path: Path,
) -> None:
    """A 250-character experiment name was accepted, then the run folder (the name plus
    its time and id) failed to be created with ``OSError: File name too long``."""
    with pytest.raises(ValueError, match="experiment") as info:
        Experiment("p", "e" * 250, root=tmp_path / "runs")
    assert "bytes" in str(info.value)
    assert not (tmp_path / "runs").exists()
