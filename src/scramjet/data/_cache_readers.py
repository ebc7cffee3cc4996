"""The processes reading one shard cache folder at once, under a ``cache_limit``.

Each process that reads a streamed pack keeps its shuffle window of shards in use, and a
shard in use is never evicted. Two processes reading different shards of a cache whose
limit holds only one window each would wait on each other for room until one gave up
(after minutes). So every reading process registers in ``<cache>/.readers/``: a file
named after its process id, holding the shards it keeps in use and locked (``flock``) for
as long as the process lives. A process that joins a cache whose limit cannot hold its
window next to those of the live readers is refused at once, naming the folder, its limit
and the limit that would hold them all. The file of a process that died (its lock gone)
is removed by the next process that counts.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from pathlib import Path

from scramjet.data._remote import ShardCache, _Locked

_registered: dict[tuple[int, str], _Locked] = {}  # (pid, cache folder): its held file
_guard = threading.Lock()


def register_reader(cache: ShardCache, keep: int) -> None:
    """Count this process as a reader of ``cache`` keeping ``keep`` shards in use, or
    raise ``ValueError`` when its limit cannot hold them next to the live readers' shards.

    Once per process and cache folder; without a ``cache_limit`` nothing is counted.
    """
    if cache.limit is None:
        return
    key = (os.getpid(), str(cache.root))
    with _guard:
        if key in _registered:
            return
        folder = cache.root / ".readers"
        folder.mkdir(exist_ok=True)
        with _Locked(cache.root / ".lock", exclusive=True, create=True):
            others = _live_readers(folder)
            fits, need = cache.room(sum(others) + keep)
            if others and not fits:  # alone, the reader's own checks apply (reader.py)
                raise ValueError(
                    f"cache_limit={cache.limit} bytes of the cache folder {str(cache.root)!r} "
                    f"cannot hold the shards {len(others) + 1} processes reading "
                    f"{cache.url!r} from it keep in use at once ({sum(others) + keep} "
                    f"shards: each keeps its shuffle window and the shard it leaves): "
                    f"{need} bytes are needed. Raise cache_limit to at least {need} bytes, "
                    "give each process a cache_dir of its own, or read from one at a time"
                )
            mine = _Locked(folder / f"{os.getpid()}.reader", exclusive=True, create=True)
            os.ftruncate(mine.fd, 0)
            os.pwrite(mine.fd, str(keep).encode(), 0)
            _registered[key] = mine


def _live_readers(folder: Path) -> list[int]:
    """The shards each live registered reader keeps in use; files of dead ones go."""
    live = []
    for entry in os.scandir(folder):
        if not entry.name.endswith(".reader"):
            continue
        try:
            with _Locked(Path(entry.path), exclusive=True, wait=False):
                Path(entry.path).unlink(missing_ok=True)  # its process is gone
            continue
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
        with contextlib.suppress(OSError, ValueError):
            live.append(int(Path(entry.path).read_text(encoding="utf-8") or 0))
    return live
