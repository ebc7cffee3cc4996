"""Run a command in a real terminal (a detached tmux session) and read the screen."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
import uuid
from collections.abc import Sequence


def tmux_available() -> bool:
    """True when the ``tmux`` executable is installed."""
    return shutil.which("tmux") is not None


def run_in_tmux(
    command: Sequence[str] | str,
    *,
    width: int = 120,
    height: int = 40,
    wait_for: str | None = None,
    timeout: float = 60.0,
    env: dict[str, str] | None = None,
) -> str:
    """Run ``command`` in a detached tmux session of a fixed size; return the pane text.

    The session runs on its own tmux server (a private socket), so no other tmux
    session on the machine is seen or touched; that server is stopped at the end.

    Args:
        command: The command (argv list or a shell string).
        width: Terminal columns.
        height: Terminal rows.
        wait_for: A regular expression; capture as soon as the screen matches it.
            Without it, capture once the command has exited.
        timeout: Seconds to wait before capturing anyway.
        env: Extra environment variables for the command.

    Returns:
        The visible pane text (``tmux capture-pane -p``), once the command has exited
        or ``wait_for`` matched.
    """
    cmd = command if isinstance(command, str) else shlex.join(command)
    if env:
        cmd = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + cmd
    socket = f"scramjet-test-{uuid.uuid4().hex[:10]}"
    tmux = ["tmux", "-L", socket, "-f", "/dev/null"]
    done_marker = f"__done_{uuid.uuid4().hex[:6]}__"
    # The shell prints a marker once the command ends, then waits so the pane stays open.
    script = f"{cmd}; printf '\\n{done_marker}'; sleep {int(timeout) + 5}"
    subprocess.run(
        [
            *tmux,
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            str(width),
            "-y",
            str(height),
            "bash",
            "--norc",
            "--noprofile",
            "-c",
            script,
        ],
        check=True,
    )
    try:
        pattern = re.compile(wait_for) if wait_for else None
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = _capture(tmux)
            if done_marker in text or (pattern is not None and pattern.search(text)):
                break
            time.sleep(0.2)
        return text.replace(done_marker, "")
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)


def _capture(tmux: list[str]) -> str:
    out = subprocess.run(
        [*tmux, "capture-pane", "-p", "-t", "t"], check=True, capture_output=True, text=True
    )
    return out.stdout
