"""The processes reading one shard cache folder at once, under a ``cache_limit``.

Each process that reads a streamed pack keeps its shuffle window of shards in use, and a
shard in use is never evicted. Two processes reading different shards of a cache whose
limit holds only one window each would wait on each other for room until one gave up
(after minutes). So every reading process registers in ``<cache>/.readers/``: a file
named after its process id, holding the shards it keeps in use and locked (``flock``) for
as long as the process lives. A process that joins a cache whose limit cannot hold its
window next to those of the live readers is refused at once, naming the folder, its limit
and the limit that would hold them all. Readers in the same order count apart too:
separate processes are not in step (one a few batches ahead, one past an epoch's end), so
each keeps shards the other does not, and sharing one window would leave both waiting for
room. The file of a process that died (its lock gone), reader or owner, is removed by the
next process that counts.

A DataLoader worker reads for the process that made the dataset (its owner): it registers
as ``<owner>.w<worker id>.reader``. Workers that are not persistent end with each epoch,
and the next epoch's worker of the same id takes that file over: while the owner lives
(its ``<owner>.owner`` file locked, see ``_remote._hold_owner``), the file of a worker
that ended keeps its place, so a process that joins between two epochs cannot take the
room of a run that started before it, nor be refused itself at a later epoch.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from scramjet.data._remote import ShardCache, _Locked

_registered: dict[tuple[int, str], _Locked] = {}  # (pid, cache folder): its held file


def register_reader(cache: ShardCache, keep: int) -> None:
    """Count this process as a reader of ``cache`` keeping ``keep`` shards in use, or
    raise ``ValueError`` when its limit cannot hold them next to the live readers' shards.

    Once per process and cache folder; without a ``cache_limit`` nothing is counted.
    """
    if cache.limit is None:
        return
    key = (os.getpid(), str(cache.root))
    if key in _registered:
        return
    folder = cache.root / ".readers"
    folder.mkdir(exist_ok=True)
    # The cache's lock is taken in turn by this process's threads too (an ``flock`` per
    # open file), so the question is asked again under it; a thread lock instead would
    # be copied held into a DataLoader worker forked meanwhile, which then never gets it.
    with _Locked(cache.root / ".lock", exclusive=True, create=True):
        if key in _registered:
            return
        slot = _slot(cache)
        kept = slot is not None and (folder / slot).exists()  # admitted at an earlier epoch
        others, mine = _live_readers(folder, slot)
        shards = sum(others) + keep
        fits, need = cache.room(shards)
        if others and not fits and not kept:  # alone: the reader's own checks (reader.py)
            if mine is not None:
                mine.close()
            raise ValueError(
                f"cache_limit={cache.limit} bytes of the cache folder {str(cache.root)!r} "
                f"cannot hold the shards {len(others) + 1} processes reading "
                f"{cache.url!r} from it keep in use at once ({shards} shards: each "
                "keeps its shuffle window and the shard it leaves): "
                f"{need} bytes are needed. Raise cache_limit to at least {need} bytes, "
                "give each process a cache_dir of its own, or read from one at a time"
            )
        if mine is None:
            mine = _Locked(folder / f"{os.getpid()}.reader", exclusive=True, create=True)
        os.ftruncate(mine.fd, 0)
        os.pwrite(mine.fd, str(keep).encode(), 0)
        _registered[key] = mine


def _slot(cache: ShardCache) -> str | None:
    """The file name a DataLoader worker of the cache's owner registers under (kept
    across epochs), or None for any other process (registered under its process id)."""
    from torch.utils.data import get_worker_info

    info = get_worker_info()
    if info is None or os.getpid() == cache.owner:
        return None
    return f"{cache.owner}.w{info.id}.reader"


def _owner_alive(folder: Path, name: str) -> bool:
    """Whether the owner named in ``<owner>.w<id>.reader`` or ``<owner>.owner`` still
    lives; the owner file of one that is gone is removed."""
    owner = name.split(".", 1)[0]
    if not (".w" in name or name.endswith(".owner")) or not owner.isdigit():
        return False
    try:
        with _Locked(folder / f"{owner}.owner", exclusive=True, wait=False):
            (folder / f"{owner}.owner").unlink(missing_ok=True)  # the owner is gone
        return False
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise
    return True


def _live_readers(folder: Path, slot: str | None) -> tuple[list[int], _Locked | None]:
    """The shards each live registered reader keeps in use (a worker that ended counts
    while its owner lives), and the file ``slot`` locked for this process when it is free;
    files of dead readers and owners go."""
    live, mine = [], None
    for entry in os.scandir(folder):
        if entry.name.endswith(".owner"):
            _owner_alive(folder, entry.name)  # removes the file of an owner that is gone
        if not entry.name.endswith(".reader"):
            continue
        try:
            # this worker's own place is written to: opened for writing
            held = _Locked(Path(entry.path), True, wait=False, create=entry.name == slot)
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
        else:
            if entry.name == slot:  # this worker's place, kept from an earlier epoch
                mine = held
                continue
            if not _owner_alive(folder, entry.name):
                Path(entry.path).unlink(missing_ok=True)  # its process is gone
                held.close()
                continue
            held.close()
        with contextlib.suppress(OSError, ValueError):
            live.append(int(Path(entry.path).read_text(encoding="utf-8") or 0))
    if slot is not None and mine is None and not (folder / slot).exists():
        mine = _Locked(folder / slot, exclusive=True, create=True)
    return live, mine
