"""``list_runs`` and ``scramjet runs`` while a cleanup removes run folders beside them: a
run (or a whole project, or a sweep) removed mid-scan is left out, the others are listed,
and nothing prints a traceback. Before, Python 3.11's ``Path.glob`` raised
``FileNotFoundError`` for a folder listed and then removed before it was descended into,
and a run removed while it was read was listed with what little was read of it."""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tracking_helpers import make_trainer, tiny_data

from scramjet.tracking import Experiment, cli_runs, list_runs


def _make_runs(root: Path, names: list[tuple[str, str]]) -> list[Path]:
    """One finished run of one epoch for each ``(project, experiment)``."""
    runs = []
    for project, experiment in names:
        exp = Experiment(project, experiment, root=root, save_script=False, checkpoint=None)
        make_trainer([exp]).train(tiny_data(), num_epochs=1, per_device_batch_size=32)
        runs.append(exp.run_dir)
    return runs


def _scramjet_runs(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    cli_runs.configure_parser(parser)
    code = cli_runs.run(parser.parse_args([str(root)]))
    out, err = capsys.readouterr()
    return code, out, err


def _remove_while_read(monkeypatch: pytest.MonkeyPatch, victim: Path) -> list[Path]:
    """Removes ``victim`` (``rm -rf``) just as its metric rows are read: scramjet's own
    reader of one run's rows is wrapped, the removal itself is real."""
    removed: list[Path] = []
    read = cli_runs.read_metrics

    def removing(run: Any) -> Any:
        if Path(run) == victim and victim.exists():
            shutil.rmtree(victim)
            removed.append(victim)
        return read(run)

    monkeypatch.setattr(cli_runs, "read_metrics", removing)
    return removed


def test_a_run_removed_while_it_is_read_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    first, victim, last = _make_runs(tmp_path, [("p", "a"), ("p", "b"), ("p", "c")])
    removed = _remove_while_read(monkeypatch, victim)
    listed = list_runs(tmp_path)
    assert removed == [victim]
    assert [r["name"] for r in listed] == [first.name, last.name]
    assert {r["status"] for r in listed} == {"finished"}

    _make_runs(tmp_path, [("p", "b")])  # another run to remove, this time under the CLI
    victim = cli_runs.find_runs(tmp_path)[-1]
    removed = _remove_while_read(monkeypatch, victim)
    code, out, err = _scramjet_runs(tmp_path, capsys)
    assert (code, err, removed) == (0, "", [victim])
    assert first.name in out and last.name in out and victim.name not in out
    assert "unreadable" not in out


@pytest.fixture
def scans_removing_siblings(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[[Path, int], list[Path]]]:
    """``os.scandir`` wrapped so that its first listing of a folder ``depth`` levels below
    ``root`` first removes (really, ``rm -rf``) every other folder directly under ``root``:
    those were listed already and are descended into next, as a cleanup removing them right
    then would. A filesystem call is patched because ``Path.glob`` runs none of scramjet's
    code between listing a folder and descending into it; the removal itself is real, and
    the test above removes a run through scramjet's own reader."""
    real = os.scandir
    removed: list[Path] = []

    def arm(root: Path, depth: int) -> list[Path]:
        def scandir(path: Any = ".") -> Any:
            if isinstance(path, int):  # a file descriptor: shutil.rmtree's own listing
                return real(path)
            here = Path(os.fspath(path))
            if not removed and here.is_relative_to(root):
                parts = here.relative_to(root).parts
                if len(parts) == depth:
                    for sibling in real(root):
                        if sibling.name != parts[0]:
                            shutil.rmtree(sibling.path)
                            removed.append(Path(sibling.path))
            return real(path)

        monkeypatch.setattr(os, "scandir", scandir)
        return removed

    yield arm


def test_a_project_removed_during_the_scan_is_left_out(
    tmp_path: Path,
    scans_removing_siblings: Callable[[Path, int], list[Path]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    runs = _make_runs(tmp_path, [("p1", "a"), ("p2", "b")])
    removed = scans_removing_siblings(tmp_path, 1)
    listed = list_runs(tmp_path)
    assert len(removed) == 1
    kept = [r for r in runs if removed[0] not in r.parents]
    assert [r["run_dir"] for r in listed] == [r.resolve() for r in kept]

    runs = _make_runs(tmp_path, [("p3", "c"), ("p4", "d")])
    removed.clear()
    code, out, err = _scramjet_runs(tmp_path, capsys)
    assert (code, err, len(removed)) == (0, "", 2)  # all but one project folder removed
    (project,) = [p.name for p in tmp_path.iterdir()]
    assert out.count(f"{project}/") == 1, out


def test_a_sweep_removed_while_deeper_runs_are_looked_for(
    tmp_path: Path,
    scans_removing_siblings: Callable[[Path, int], list[Path]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A root holding sweeps (``ROOT/SWEEP/PROJECT/RUN``) lists no run itself and names the
    sweeps to pass instead; one removed while they are looked for is left out."""
    _make_runs(tmp_path / "sweep1", [("p", "a")])
    _make_runs(tmp_path / "sweep2", [("p", "b")])
    removed = scans_removing_siblings(tmp_path, 2)
    code, out, err = _scramjet_runs(tmp_path, capsys)
    assert (code, err, len(removed)) == (0, "", 1)
    (kept,) = [p for p in tmp_path.iterdir()]
    assert "run folders lie further down" in out and f"{kept} (1 run)" in out, out
    assert str(removed[0]) not in out
