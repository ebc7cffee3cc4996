"""Worker processes of a streamed pack's loader (``backend="processes"``) end when the
process that started them is killed (SIGKILL, the OOM killer) while they wait on a
download, instead of living on as orphans holding the cache's locks and memory."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from packdata_helpers import write_csv, write_images

from scramjet.data import PackedDataset, pack

READER = textwrap.dedent(
    """
    import sys
    from scramjet.data import PackedDataset
    ds = PackedDataset(sys.argv[1], cache_dir=sys.argv[2], prefetch=0, shuffle_window=1)
    loader = ds.loader(2, num_workers=2, backend="processes")
    for batch in loader:  # the workers wait on downloads that never end
        pass
    """
)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_workers_waiting_on_a_download_exit_when_their_parent_is_killed(tmp_path: Path) -> None:
    root = tmp_path / "imgs"
    names = write_images(root, 8)
    write_csv(
        root / "list.csv", ["image", "label"], [[n, str(i)] for i, (n, _) in enumerate(names)]
    )
    url = f"file://{tmp_path / 'store' / 'p.pack'}"
    pack(root, root / "list.csv", url, dtype=["int64"], height=8, width=8, encode="raw",
         shards=4, workers=0, progress=False)  # fmt: skip
    cache = tmp_path / "cache"
    manifest = PackedDataset(url, cache_dir=tmp_path / "other").manifest
    (cache / ".locks").mkdir(parents=True)
    held = []  # every shard's download lock: a download "in progress" that never ends
    for info in manifest.shards:
        fd = os.open(cache / ".locks" / f"{info.sha256}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        held.append(fd)
    reader = subprocess.Popen([sys.executable, "-c", READER, url, str(cache)])
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(workers) < 2 and time.monotonic() < deadline and reader.poll() is None:
            time.sleep(0.2)
            workers = _children(reader.pid)
        assert len(workers) >= 2, f"the reader started no workers (exit {reader.poll()})"
        time.sleep(1.0)  # the workers reach the download locks and wait there
        reader.send_signal(signal.SIGKILL)
        reader.wait(10)
        deadline = time.monotonic() + 5
        while any(map(_alive, workers)) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [pid for pid in workers if _alive(pid)]
        assert not left, f"worker processes {left} outlived their killed parent"
    finally:
        for pid in workers:  # the test's own leftovers, if the check above failed
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if reader.poll() is None:
            reader.kill()
        for fd in held:
            os.close(fd)
