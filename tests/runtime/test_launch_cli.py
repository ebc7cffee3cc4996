"""`scramjet launch` takes torchrun's command lines and says what is wrong in one line."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from scramjet.cli import main
from scramjet.runtime import cli as launch_cli


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    launch_cli.configure_parser(parser)
    return parser.parse_args(argv)


def test_torchrun_spellings_give_the_same_command_as_scramjets() -> None:
    ours = ["--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1", "--nproc-per-node"]
    theirs = ["--nnodes=2", "--node_rank=1", "--master_addr=10.0.0.1", "--nproc_per_node"]
    a = launch_cli.build_torchrun_argv(_parse([*ours, "4", "t.py", "--lr", "1"]))
    b = launch_cli.build_torchrun_argv(_parse([*theirs, "4", "t.py", "--lr", "1"]))
    assert a == b
    assert a[-3:] == ["t.py", "--lr", "1"] and "--nproc-per-node=4" in a


def test_rendezvous_endpoint_and_elastic_node_counts_pass_through() -> None:
    argv = launch_cli.build_torchrun_argv(
        _parse(
            ["--nnodes", "1:3", "--rdzv_endpoint", "127.0.0.1:29400", "--rdzv-id", "job7", "t.py"]
        )
    )
    assert "--nnodes=1:3" in argv and "--rdzv-endpoint=127.0.0.1:29400" in argv
    assert "--rdzv-backend=c10d" in argv and "--rdzv-id=job7" in argv
    assert not any(a.startswith("--master") for a in argv)
    conf = ["--rdzv-endpoint", "h:1", "--rdzv_conf", "join_timeout=30,last_call_timeout=2", "t.py"]
    assert "--rdzv-conf=join_timeout=30,last_call_timeout=2" in launch_cli.build_torchrun_argv(
        _parse(conf)
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nproc-per-node", "0"], "--nproc-per-node must be a number >= 1"),
        (["--nproc-per-node", "lots"], "got 'lots'"),
        (["--nnodes", "3:1"], "--nnodes must be a number >= 1 or MIN:MAX"),
        (["--nnodes", "2"], "needs --master-addr"),
        (["--rdzv-conf", "join_timeout=5"], "--rdzv-conf join_timeout=5 is only used with"),
        (["--rdzv-endpoint", "h:1", "--rdzv-conf", "join_timeout"], "KEY=VALUE pairs"),
        (["--rdzv-endpoint", "h:1", "--rdzv-conf", "join_timeout=soon"], "got 'soon'"),
        (["--rdzv-endpoint", "h:1", "--rdzv-conf", "join_timeout=0"], "seconds > 0"),
        (
            ["--nnodes", "2", "--master-addr", "10.0.0.1", "--max-restarts", "1"],
            "needs the c10d rendezvous, which starts each round afresh: give every node "
            "--rdzv-endpoint 10.0.0.1:29500",
        ),
    ],
)
def test_bad_options_are_one_line_on_stderr_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    script = tmp_path / "t.py"
    script.write_text("print('ran')\n")
    assert main(["launch", *args, str(script)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and message in captured.err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without a GPU")
def test_gpu_processes_without_a_gpu_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "t.py"
    script.write_text("print('ran')\n")
    assert main(["launch", "--nproc-per-node", "gpu", str(script)]) == 2
    err = capsys.readouterr().err
    assert "no CUDA GPU is visible" in err and "Traceback" not in err


def test_a_missing_script_suggests_dash_m(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["launch", "no_such_script.py"]) == 2
    assert "pass -m" in capsys.readouterr().err


def test_dash_m_runs_a_module_on_every_process(tmp_path: Path) -> None:
    (tmp_path / "hello_ranks.py").write_text(
        "import os, sys\n"
        "from pathlib import Path\n"
        "Path(f\"rank{os.environ['RANK']}.txt\").write_text(' '.join(sys.argv[1:]))\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "scramjet.cli",
            "launch",
            "--nproc_per_node=2",
            "-m",
            "hello_ranks",
            "--flag",
            "x",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "rank0.txt").read_text() == "--flag x"
    assert (tmp_path / "rank1.txt").read_text() == "--flag x"


def test_launch_without_a_script_says_what_to_pass(capsys: pytest.CaptureFixture[str]) -> None:
    # argparse said "the following arguments are required: script, script_args", though
    # the script's arguments are optional
    assert main(["launch", "--nproc-per-node", "2"]) == 2
    err = capsys.readouterr().err
    assert "no script to run" in err and "script_args" not in err and err.count("\n") == 1


@pytest.mark.parametrize("option", ["--n", "--max", "--nproc", "--rdzv", "--master"])
def test_script_options_that_start_like_a_launcher_option_reach_the_script(option: str) -> None:
    # argparse matched them by prefix: '--n 63' was an ambiguous launcher option (exit 2)
    argv = launch_cli.build_torchrun_argv(_parse(["t.py", option, "63", "--lr", "1"]))
    assert argv[-5:] == ["t.py", option, "63", "--lr", "1"], argv
    assert "--nproc-per-node=1" in argv


def test_a_script_option_like_a_torchrun_option_reaches_the_running_script(
    tmp_path: Path,
) -> None:
    # torchrun's own parser read '--n 63' as an ambiguous abbreviation of its options
    script = tmp_path / "t.py"
    script.write_text(
        "import json, sys\nfrom pathlib import Path\n"
        "Path(sys.argv[0]).with_name('argv.json').write_text(json.dumps(sys.argv[1:]))\n"
    )
    launch = [sys.executable, "-m", "scramjet.cli", "launch", "--nproc-per-node", "1"]
    done = subprocess.run(
        [*launch, str(script), "--n", "63", "--max", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "argv.json").read_text() == '["--n", "63", "--max", "2"]'
