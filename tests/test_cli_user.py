"""The ``scramjet`` command as a practitioner types it: mistyped names get a suggestion,
table columns keep their meaning, and wrong paths or values are one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scramjet.cli import main


def _run_folder(root: Path, name: str, hyperparams: dict, run_json: str | None = None) -> Path:
    run = root / "proj" / name
    run.mkdir(parents=True)
    (run / "hyperparams.json").write_text(json.dumps({"hyperparams": hyperparams}))
    if run_json is not None:
        (run / "run.json").write_text(run_json)
    return run


def test_mistyped_command_names_the_closest_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["dmeo"])
    assert exit_info.value.code == 2
    assert "did you mean demo?" in capsys.readouterr().err


def test_mistyped_option_names_the_closest_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["runs", str(tmp_path), "--projcet", "p"])
    assert "--projcet: did you mean --project?" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse names only the missing --width
        main(["pack", "a", "b.csv", "c", "--dtype", "int64", "--height", "8", "--widht", "8"])
    assert "--widht: did you mean --width?" in capsys.readouterr().err


def test_runs_hyperparameter_named_like_a_column_gets_its_own_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run_folder(tmp_path, "a", {"epochs": 10, "status": "x"})
    _run_folder(tmp_path, "b", {"epochs": 20, "status": "y"})
    assert main(["runs", str(tmp_path)]) == 0
    header = capsys.readouterr().out.splitlines()[0].split()
    assert header.count("epochs") == 1 and header.count("status") == 1
    assert "hp.epochs" in header and "hp.status" in header


def test_runs_metric_named_like_a_column_keeps_the_column_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run_folder(tmp_path, "a", {}, json.dumps({"status": "finished"}))
    assert main(["runs", str(tmp_path), "--metrics", "status"]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split()[-1] == "metric.status"
    assert row.split()[1] == "finished"  # not overwritten by the missing metric's "-"


def test_runs_shows_a_damaged_run_json_as_list_runs_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scramjet.tracking import list_runs

    _run_folder(tmp_path, "a", {}, "{half-writ")
    assert main(["runs", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert list_runs(tmp_path)[0]["status"].startswith("unreadable")
    assert "unreadable (run.json is not a JSON object)" in out


def test_report_output_with_a_trailing_slash_is_a_new_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _run_folder(tmp_path, "a", {"lr": 1}, json.dumps({"status": "finished"}))
    b = _run_folder(tmp_path, "b", {"lr": 2}, json.dumps({"status": "finished"}))
    out = tmp_path / "pages ü"
    assert main(["report", str(a), str(b), "-o", f"{out}/"]) == 0
    assert (out / "compare.html").is_file()  # not a file named "pages ü"


def test_launch_given_a_folder_says_it_is_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["launch", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is a folder" in err and "does not exist" not in err


def test_launch_master_port_out_of_range_is_an_option_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('trained')\n")
    assert main(["launch", "--master-port", "99999", str(script)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--master-port" in err and "99999" in err


def _images(root: Path) -> Path:
    import numpy as np
    from PIL import Image

    root.mkdir()
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(root / "a.png")
    (root / "list.csv").write_text("image,label\na.png,1\n")
    return root


def test_pack_under_a_file_names_the_file_not_an_internal_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    imgs = _images(tmp_path / "imgs")
    dst = imgs / "list.csv" / "out.pack"
    code = main(["pack", str(imgs), str(imgs / "list.csv"), str(dst), "--dtype", "int64",
                 "--height", "4", "--width", "4", "--no-progress"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1
    assert f"cannot create {str(dst)!r}" in err and "is a file, not a folder" in err
    assert ".partial" not in err


def test_pack_errors_give_fixes_as_command_line_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    imgs = _images(tmp_path / "imgs")
    code = main(["pack", str(imgs), str(imgs / "list.csv"), str(tmp_path / "o.pack"),
                 "--dtype", "int64", "--height", "4", "--width", "4", "--quality", "0",
                 "--no-progress"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1
    assert "--quality 95" in err and "quality=95" not in err


def test_python_dash_m_scramjet_is_the_scramjet_command() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "scramjet", "runs", "--help"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "usage: scramjet runs" in done.stdout
