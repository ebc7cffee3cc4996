"""bin/aws: argument handling, the exact commands of --dry-run, and a run with stand-in tools.

No network: dry runs only print; the non-dry run puts logging stand-ins for ``ssh``,
``rsync`` and ``aws`` first on PATH.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "bin" / "aws"
SSH = ["-o", "StrictHostKeyChecking=accept-new"]


def run(
    script: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPTS / script), *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        check=False,
    )


def commands(result: subprocess.CompletedProcess[str]) -> list[list[str]]:
    assert result.returncode == 0, result.stderr
    return [shlex.split(line) for line in result.stdout.splitlines()]


def test_prepare_instance_dry_run_prints_the_copy_and_the_install(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    out = run(
        "prepare_instance.sh",
        "--dry-run",
        "-a",
        "gpu.example",
        "-k",
        "/keys/k.pem",
        "--project",
        str(project),
        "--requirements",
        "req.txt",
    )
    assert commands(out) == [
        [
            "rsync",
            "-az",
            "--exclude",
            ".git",
            "--exclude",
            ".venv",
            "--exclude",
            "__pycache__",
            "-e",
            "ssh -i /keys/k.pem -o StrictHostKeyChecking=accept-new",
            f"{project}/",
            "ubuntu@gpu.example:proj/",
        ],
        [
            "ssh",
            "-i",
            "/keys/k.pem",
            *SSH,
            "ubuntu@gpu.example",
            "python3 -m pip install --upgrade pip && python3 -m pip install scramjet -r proj/req.txt",
        ],
    ]


def test_train_and_shutdown_dry_run_looks_up_the_address_and_stops_the_instance() -> None:
    out = run(
        "train_and_shutdown.sh",
        "--dry-run",
        "-i",
        "i-0abc",
        "--region",
        "eu-west-1",
        "-p",
        "proj",
        "--terminate",
        "--",
        "python3",
        "train.py",
        "--note",
        "two words",
    )
    lines = commands(out)
    assert lines[0] == [
        "aws",
        "--region",
        "eu-west-1",
        "ec2",
        "describe-instances",
        "--instance-ids",
        "i-0abc",
        "--query",
        "Reservations[0].Instances[0].PublicDnsName",
        "--output",
        "text",
    ]
    assert lines[1][:-1] == ["ssh", *SSH, "ubuntu@<public-dns-of-i-0abc>"]
    assert shlex.split(lines[1][-1]) == [
        "cd",
        "proj",
        "&&",
        "python3",
        "train.py",
        "--note",
        "two words",
    ]
    assert lines[2] == [
        "aws",
        "--region",
        "eu-west-1",
        "ec2",
        "terminate-instances",
        "--instance-ids",
        "i-0abc",
    ]


def test_update_scripts_dry_run(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    files = commands(
        run(
            "update_files.sh",
            "--dry-run",
            "-a",
            "h",
            "-u",
            "ec2-user",
            "-p",
            str(project),
            "--delete",
        )
    )
    assert files == [
        [
            "rsync",
            "-az",
            "--delete",
            "--exclude",
            ".git",
            "--exclude",
            ".venv",
            "--exclude",
            "__pycache__",
            "-e",
            "ssh -o StrictHostKeyChecking=accept-new",
            f"{project}/",
            "ec2-user@h:p/",
        ]
    ]
    package = commands(run("update_package.sh", "--dry-run", "-a", "h"))
    root = SCRIPTS.parents[1]
    assert package[1] == [
        "python3",
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--wheel-dir",
        f"{root}/dist/aws-update",
        str(root),
    ]
    assert package[2][-1] == "ubuntu@h:/tmp/" and package[3][-1].startswith(
        "python3 -m pip install --force-reinstall --no-deps /tmp/scramjet-"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["prepare_instance.sh", "--dry-run", "-a", "h"], "--project DIR is required"),
        (["prepare_instance.sh", "--dry-run", "-a", "h", "-p", "/no/such/dir"], "is not a folder"),
        (["update_files.sh", "--dry-run", "-k"], "option -k needs a value"),
        (["update_files.sh", "--dry-run", "--bogus"], "unknown option: --bogus"),
        (["update_files.sh", "--dry-run", "-p", "."], "--address HOST or --instance-id ID"),
        (
            ["train_and_shutdown.sh", "--dry-run", "-a", "h", "-p", "x", "--", "ls"],
            "--instance-id ID is required",
        ),
        (
            ["train_and_shutdown.sh", "--dry-run", "-i", "i-1", "-p", "x"],
            "training command after --",
        ),
    ],
)
def test_bad_arguments_exit_2_with_the_reason_and_the_usage(args: list[str], message: str) -> None:
    out = run(*args)
    assert out.returncode == 2 and message in out.stderr and "usage:" in out.stderr
    assert out.stdout == ""


def test_the_instance_is_stopped_even_when_training_fails(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_ins = {
        "ssh": 'echo "ssh $*" >> "$LOG"; exit 3',  # the training command fails
        "aws": 'echo "aws $*" >> "$LOG"; [ "$2" = describe-instances ] && echo gpu.example; exit 0',
    }
    for name, body in stand_ins.items():
        tool = bin_dir / name
        tool.write_text(f"#!/usr/bin/env bash\n{body}\n")
        tool.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(log)}
    out = run("train_and_shutdown.sh", "-i", "i-9", "-p", "proj", "--", "python3", "t.py", env=env)
    assert out.returncode == 3
    calls = log.read_text().splitlines()
    assert calls[0].startswith("aws ec2 describe-instances --instance-ids i-9")
    assert (
        calls[1]
        == "ssh -o StrictHostKeyChecking=accept-new ubuntu@gpu.example cd proj && python3 t.py"
    )
    assert calls[2] == "aws ec2 stop-instances --instance-ids i-9"
