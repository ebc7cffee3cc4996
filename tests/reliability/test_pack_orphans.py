"""``kill -9`` of ``scramjet pack --pool processes`` leaves no process behind.

A worker that outlived a killed ``pack`` would wait forever for its next chunk and keep
``pack``'s stdout open, so ``scramjet pack ... | cat`` would never end. Each test here starts ``pack`` in a session of its own, SIGKILLs only the
``pack`` process, and checks that within a few seconds nothing of that session is alive
and that ``pack``'s stdout reaches end of file.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="reads the process table from /proc"
)

WORKERS = 2
# Helpers of a running process pool: its worker processes.
HELPERS = WORKERS
GONE_WITHIN_S = 5.0  # how long the helpers may take to end after the kill
STARTUP = -1.0  # kill moment: as soon as the first helper appears (pool still starting)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """400 rows naming one 800x800 noise PNG: slow to decode, so pack runs for seconds."""
    root = tmp_path_factory.mktemp("orphans")
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (800, 800, 3), dtype=np.uint8)).save(root / "big.png")
    rows = "".join(f"big.png\t{i % 3}\n" for i in range(400))
    (root / "list.csv").write_text("image\tlabel\n" + rows, encoding="utf-8")
    return root


def session_members(sid: int) -> dict[int, int]:
    """Live processes (pid -> parent pid) of session ``sid``; zombies hold nothing."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # ended meanwhile
            continue
        state, ppid, _group, session = stat[stat.rindex(")") + 2 :].split()[:4]
        if int(session) == sid and state not in ("Z", "X"):
            found[int(entry)] = int(ppid)
    return found


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
    except OSError:
        return "?"


@dataclass
class Kill:
    moment: float  # seconds after the workers appeared; STARTUP: during pool startup
    left: list[str]  # command lines of the processes still alive at the deadline
    stdout_eof: bool
    seconds: float  # from the kill until everything was gone (the deadline if not)


def kill_pack(dataset: Path, dst: Path, moment: float) -> Kill:
    """Start pack, SIGKILL it at ``moment``, and watch what remains of its session."""
    cmd = [sys.executable, "-m", "scramjet.cli", "pack", str(dataset), str(dataset / "list.csv"),
           str(dst), "--dtype", "int64", "--height", "64", "--width", "64", "--pool",
           "processes", "--workers", str(WORKERS), "--no-progress"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        wanted = 1 if moment == STARTUP else HELPERS
        deadline = time.monotonic() + 60
        while len(session_members(proc.pid)) - 1 < wanted:
            assert proc.poll() is None, f"pack ended before the kill (exit code {proc.returncode})"
            assert time.monotonic() < deadline, "the pool's processes never started"
            time.sleep(0.01)
        time.sleep(max(0.0, moment))
        assert proc.poll() is None, "pack finished before the kill: give it more rows"
        os.kill(proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        proc.wait()
        fd = proc.stdout.fileno() if proc.stdout else -1
        os.set_blocking(fd, False)
        eof = False
        left = session_members(proc.pid)
        while time.monotonic() - killed < GONE_WITHIN_S:
            if not eof and select.select([fd], [], [], 0.01)[0]:
                eof = os.read(fd, 65536) == b""
            left = session_members(proc.pid)
            if eof and not left:
                break
            time.sleep(0.01)
        seconds = time.monotonic() - killed
        return Kill(moment, [command_line(pid) for pid in left], eof, seconds)
    finally:
        for pid in session_members(proc.pid):  # what this test started and is still alive
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()


def describe(kill: Kill) -> str:
    when = "during pool startup" if kill.moment == STARTUP else f"{kill.moment:.2f} s in"
    return (
        f"kill {when}: stdout EOF {kill.stdout_eof}, alive after {kill.seconds:.1f} s: {kill.left}"
    )


@pytest.mark.parametrize("moment", [STARTUP, 0.0, 0.5], ids=["startup", "workers-up", "encoding"])
def test_kill_9_of_pack_leaves_no_process(dataset: Path, tmp_path: Path, moment: float) -> None:
    kill = kill_pack(dataset, tmp_path / "out.pack", moment)
    assert not kill.left and kill.stdout_eof, describe(kill)


@pytest.mark.slow
def test_kill_9_of_pack_twenty_times(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    moments = [STARTUP, 0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8, 1.0, 1.5] * 2
    kills = [kill_pack(dataset, tmp_path / f"out{k}.pack", m) for k, m in enumerate(moments)]
    bad = [k for k in kills if k.left or not k.stdout_eof]
    with capsys.disabled():
        print(f"\norphans after kill -9 of pack: {len(bad)} of {len(kills)}")
        ends = sorted(k.seconds for k in kills if k not in bad)
        if ends:
            print(f"all gone and stdout at EOF after the kill: median {ends[len(ends) // 2]:.2f} s, "
                  f"slowest {ends[-1]:.2f} s")  # fmt: skip
    assert not bad, "\n".join(describe(k) for k in bad)
