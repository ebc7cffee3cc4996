"""CheckpointManager save/load time against bare torch.save / torch.load of the same state.

State: an MLP with about 16 M float32 parameters (64 MB) and its AdamW state (two more
tensors per parameter, 128 MB), so each file is about 193 MB.

Compared side by side in one run, in a shuffled order each round, with ``os.sync()``
(untimed) before every save so no variant pays for another's pending writes; the
median of ``--repeats`` rounds is reported:

save
  - ``bare``: ``torch.save(state_dicts, path)``; no fsync (data may still be in the
    page cache when it returns: a crash can lose or truncate it).
  - ``bare+fsync``: the same, then fsync of the file, rename over the final name and
    fsync of the directory: the durability CheckpointManager gives.
  - ``manager``: ``CheckpointManager.save`` with the default ``async_write=True``: the
    time until ``save()`` returns (what the training loop waits for: a snapshot of the
    tensors) and, separately, the time until the file is durable (``save()`` +
    ``wait()``: temp file, fsync, rename, directory fsync, index, rotation).
  - ``manager sync``: ``CheckpointManager(async_write=False).save``: everything inside
    ``save()``.
  - ``manager sync fsync=False``: the synchronous manager without fsync, to isolate its
    own overhead.
load
  - ``bare``: ``torch.load(weights_only=True)`` + ``load_state_dict`` on model and optimizer.
  - ``manager``: ``CheckpointManager.load`` of the same objects, which checks the file's
    checksum trailer before parsing it (every file of this version has one).
  - ``checksum``: that verification alone (``payload.verify_file``), to show its share.

The manager's files carry the checksum; the bare files do not. The manager's background
writer computes it while writing, so it adds nothing to the blocking time of ``save()``.

Run: ``python benchmarks/checkpoint.py [--repeats 11] [--hidden 2048] [--dir PATH]``.
The default directory is on the same disk as the current directory (not tmpfs, where
fsync would cost nothing).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from scramjet.checkpoint import CheckpointManager
from scramjet.checkpoint.payload import verify_file


def make_state(hidden: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(1024, hidden),
        nn.ReLU(),
        *[m for _ in range(3) for m in (nn.Linear(hidden, hidden), nn.ReLU())],
        nn.Linear(hidden, 10),
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(2, 1024)).sum().backward()
    opt.step()  # creates exp_avg / exp_avg_sq for every parameter
    return model, opt


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def timed(fn: Callable[..., object], *args: object, **kwargs: object) -> float:
    start = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - start


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}, Python {platform.python_version()}"


def run(repeats: int, hidden: int, root: Path) -> None:
    model, opt = make_state(hidden)
    n_params = sum(p.numel() for p in model.parameters())
    bare_dir, sync_dir = root / "bare", root / "bare_fsync"
    bare_dir.mkdir()
    sync_dir.mkdir()
    manager = CheckpointManager(root / "manager", keep_last=2)
    sync = CheckpointManager(root / "manager_sync", keep_last=2, async_write=False)
    nosync = CheckpointManager(
        root / "manager_nofsync", keep_last=2, fsync=False, async_write=False
    )
    state = {"model": model, "optimizer": opt}
    names = ("bare", "bare+fsync", "manager", "durable", "sync", "nofsync")
    times: dict[str, list[float]] = {k: [] for k in names}
    loads: dict[str, list[float]] = {"bare": [], "manager": [], "checksum": []}
    last_async: dict[str, float] = {}

    def async_save(step: int) -> None:
        # Timed apart: until save() returns, and until wait() returns (durable). The wait
        # is part of this variant, so its write never overlaps another variant's save.
        start = time.perf_counter()
        manager.save(state, step=step)
        last_async["manager"] = time.perf_counter() - start
        manager.wait()
        last_async["durable"] = time.perf_counter() - start

    def bare_save(step: int) -> None:
        torch.save(
            {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step},
            bare_dir / f"{step}.pt",
        )

    def durable_save(step: int) -> None:
        tmp, final = sync_dir / f".{step}.tmp", sync_dir / f"{step}.pt"
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, tmp)
        fsync_path(tmp)
        os.replace(tmp, final)
        fsync_path(sync_dir)

    def bare_load(step: int) -> None:
        payload = torch.load(bare_dir / f"{step}.pt", weights_only=True, map_location="cpu")
        model.load_state_dict(payload["model"])
        opt.load_state_dict(payload["optimizer"])

    rng = random.Random(0)
    for step in range(repeats + 1):  # round 0 warms up caches and allocators
        saves: list[tuple[str, Callable[..., object], dict[str, object]]] = [
            ("bare", bare_save, {}),
            ("bare+fsync", durable_save, {}),
            ("manager", async_save, {}),
            ("sync", sync.save, {"state": state}),
            ("nofsync", nosync.save, {"state": state}),
        ]
        rng.shuffle(saves)  # no variant always runs right after another one's writes
        results: dict[str, float] = {}
        for name, fn, kwargs in saves:
            os.sync()  # start each save with no dirty pages of the others (not timed)
            results[name] = timed(fn, step=step, **kwargs)
        results.update(last_async)
        os.sync()
        load_bare = timed(bare_load, step)
        load_manager = timed(manager.load, state)
        latest = manager.latest_path
        checksum = timed(verify_file, latest) if latest is not None else 0.0
        for stale in (bare_dir / f"{step - 2}.pt", sync_dir / f"{step - 2}.pt"):
            stale.unlink(missing_ok=True)  # same disk footprint as keep_last=2
        if step == 0:
            continue
        for key, value in results.items():
            times[key].append(value)
        loads["bare"].append(load_bare)
        loads["manager"].append(load_manager)
        loads["checksum"].append(checksum)

    size_mb = manager.latest_path.stat().st_size / 1e6 if manager.latest_path else 0.0
    report(times, loads, f"{n_params / 1e6:.1f} M parameters + AdamW state, file {size_mb:.0f} MB")
    print(f"{repeats} rounds; directory {root}")
    load1, load5, _ = os.getloadavg()
    print(f"load average: {load1:.2f} (1 min), {load5:.2f} (5 min) on {os.cpu_count()} cores")


def report(times: dict[str, list[float]], loads: dict[str, list[float]], what: str) -> None:
    med = {k: statistics.median(v) for k, v in times.items()}
    lmed = {k: statistics.median(v) for k, v in loads.items()}
    low = {k: min(v) for k, v in [*times.items(), *(("load " + k, v) for k, v in loads.items())]}
    print(f"machine: {machine()}")
    print(f"state: {what}; median and minimum over the rounds")
    print(f"{'operation':<42}{'median s':>9}{'min s':>8}{'ratio':>8}")
    rows = [
        ("save: bare torch.save (no fsync)", "bare", med["bare"], None),
        ("save: bare + fsync + rename + dir fsync", "bare+fsync", med["bare+fsync"], "bare"),
        ("save: CheckpointManager, blocking", "manager", med["manager"], "bare"),
        ("save: CheckpointManager, until durable", "durable", med["durable"], "bare"),
        ("  until durable vs bare + fsync + rename", "durable", None, "bare+fsync"),
        ("save: CheckpointManager(async_write=False)", "sync", med["sync"], "bare"),
        ("save: ...(async_write=False, fsync=False)", "nofsync", med["nofsync"], "bare"),
        ("load: bare torch.load + load_state_dict", "load bare", lmed["bare"], None),
        ("load: CheckpointManager.load", "load manager", lmed["manager"], "load bare"),
        ("  of which checksum verification", "load checksum", lmed["checksum"], "load bare"),
    ]
    base = {**med, **{"load " + k: v for k, v in lmed.items()}}
    for label, key, seconds, versus in rows:
        mine = base[str(key)] if seconds is None else seconds
        s = "" if seconds is None else f"{seconds:9.3f}{low[key]:8.3f}"
        r = f"{mine / base[versus]:7.2f}x" if versus else ""
        print(f"{label:<42}{s:>17}{r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--hidden", type=int, default=2048, help="MLP width (2048: ~16 M params)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: ./)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    parent = args.dir or Path.cwd()
    parent.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix=".bench-checkpoint-", dir=parent))
    try:
        run(args.repeats, args.hidden, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
