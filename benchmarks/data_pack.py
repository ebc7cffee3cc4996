"""Packing throughput and bytes on disk: thread pool vs process pool, per encoding.

One run on the same synthetic source JPEGs. Baseline: a serial PIL resize+encode loop
(the work a hand-written packer does, without writing anything). Then
``scramjet.data.pack`` with 1 worker (in the calling thread) and with ``--workers``
encoding workers as a thread pool (``pool="threads"``) and as a process pool
(``pool="processes"``), for each encoding. Every configuration runs once per round, in an
order that rotates from round to round, so load from other processes hits them alike;
the table gives the median samples/s over the rounds (and the range), the ratio to the
serial loop, the ratio threads / processes, and bytes on disk against the loose source
files and a WebDataset-style tar of them.

A process pool's figure includes starting its workers: fresh interpreters that import
scramjet's encoding code (not this script, nor torch), about 0.3 s.

Scaling: the encoding stage alone (the pool running pack's per-row task: open, resize,
encode, with nothing written) is timed with 1 thread, with ``--workers`` threads and
with ``--workers`` of pack's worker processes (their start included) in the same rounds,
and the script prints ``rate(N) / (N x rate(1))`` for each and for the whole pack (which
adds the serial stages: checking rows, writing shards, hashing them). The worker
processes also run once more as they were started before they kept 16 MiB of padding at
the top of their heap (glibc then trims the heap after every freed image, and the next
image is faulted in again), with the ratio of the two.

With simplejpeg installed, pack decodes JPEG sources and encodes JPEG frames with it
(libjpeg-turbo, GIL released); ``--encoder pil`` hides simplejpeg from this script and
its worker processes (a stand-in module that fails to import, first on the import path
they inherit), so the same run measures Pillow's path (the fallback).

    .venv/bin/python benchmarks/data_pack.py            # default: 512 images, 256 -> 224 px
    .venv/bin/python benchmarks/data_pack.py --n 2048 --rounds 5 --encodings jpeg
    .venv/bin/python benchmarks/data_pack.py --encoder pil   # Pillow only
"""

from __future__ import annotations

import argparse
import io
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import PIL
import torch
from data_read import machine, make_images, write_tars
from PIL import Image

from scramjet.data import _pool, pack
from scramjet.data.csvlist import check_header, read_table
from scramjet.data.images import simplejpeg_module
from scramjet.data.writer import _encode_task, _parse_rows


def serial_baseline(root: Path, names: list[str], size: int, quality: int) -> float:
    """Samples/s of a plain loop: open, convert to RGB, resize, encode JPEG in memory."""
    start = time.perf_counter()
    for name in names:
        with Image.open(root / name) as img:
            small = img.convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
        small.save(io.BytesIO(), format="JPEG", quality=quality)
    return len(names) / (time.perf_counter() - start)


def encode_stage(
    root: Path,
    names: list[str],
    args: argparse.Namespace,
    workers: int,
    pool: str = "threads",
    after_start: list[float] | None = None,
) -> float:
    """Samples/s of pack's encoding task alone on ``workers`` threads or worker processes
    (started inside the timing), with nothing written; ``after_start`` gets the rate from
    the first result on (the workers' start left out)."""
    encode = args.encodings.split(",")[0]
    tasks = [(i, [str(root / n)], args.size, args.size, 3, encode, args.quality, True)
             for i, n in enumerate(names)]  # fmt: skip
    start = time.perf_counter()
    first = None
    for _ in _pool.results(_encode_task, tasks, workers, pool):
        first = first or time.perf_counter()
    end = time.perf_counter()
    if after_start is not None and first is not None:  # also the rate once the workers run
        after_start.append((len(tasks) - 1) / (end - first))
    return len(tasks) / (end - start)


def encode_stage_unpadded(
    root: Path, names: list[str], args: argparse.Namespace, after_start: list[float]
) -> float:
    """The same in pack's worker processes started as before their heap padding: glibc
    trims the heap top after every freed image, so each image is faulted in again."""
    padding = _pool._WORKER_ENV
    _pool._WORKER_ENV = {k: v for k, v in padding.items() if k != "MALLOC_TOP_PAD_"}
    try:
        return encode_stage(root, names, args, args.workers, "processes", after_start)
    finally:
        _pool._WORKER_ENV = padding


def row_check(root: Path) -> tuple[float, float]:
    """Microseconds per CSV row of pack's row check (every path resolved inside file_dir,
    values parsed; serial work before any encoding starts), and of a plain pathlib check
    of the same paths (``resolve()``, inside the folder, ``is_file()``): the baseline."""
    header, table = read_table(root / "list.csv")
    dtypes = check_header(header, ["int64"])
    base = root.resolve()
    start = time.perf_counter()
    for _, cells in table:
        full = (base / cells[0]).resolve()
        if not (full.is_relative_to(base) and full.is_file()):
            raise FileNotFoundError(full)
    plain = (time.perf_counter() - start) / len(table) * 1e6
    start = time.perf_counter()
    _parse_rows(base, header, dtypes, table, False, "raise", [])
    return plain, (time.perf_counter() - start) / len(table) * 1e6


def worker_start(workers: int, blas_threads: bool = False) -> float:
    """Seconds from asking for ``workers`` worker processes to their first answers (one
    empty task each), from this script, which has imported torch. ``blas_threads``: as
    they started before they were given one BLAS thread each (numpy's OpenBLAS then
    starts a thread per core in every worker)."""
    tasks = [(i, [], 8, 8, 3, "raw", 90, False) for i in range(workers)]
    env = _pool._WORKER_ENV
    if blas_threads:
        _pool._WORKER_ENV = {k: v for k, v in env.items() if k not in _pool._ONE_THREAD}
    try:
        start = time.perf_counter()
        for _ in _pool.results(_encode_task, tasks, workers, "processes"):
            pass
        return time.perf_counter() - start
    finally:
        _pool._WORKER_ENV = env


def encode_stage_processes(
    root: Path, names: list[str], args: argparse.Namespace, pool: Any
) -> float:
    """Samples/s of the same encoding task in ``args.workers`` forked processes (started
    beforehand): no GIL at all, so its ratio to one worker is how far this machine's cores
    scale on this work."""
    encode = args.encodings.split(",")[0]
    tasks = [(i, [str(root / n)], args.size, args.size, 3, encode, args.quality, True)
             for i, n in enumerate(names)]  # fmt: skip
    start = time.perf_counter()
    pool.map(_encode_task, tasks, chunksize=8)
    return len(tasks) / (time.perf_counter() - start)


# Pillow's C calls that release the GIL while they run (decode, resize, convert/copy, and
# JPEG encoding into a file with a descriptor), and simplejpeg's decode and encode;
# everything else in the task holds it.
_GIL_FREE = ("decode", "resize", "encode_to_file", "copy", "convert")
_SIMPLEJPEG_GIL_FREE = ("decode_jpeg", "encode_jpeg")


def _gil_free_wrapper(fn: Any) -> Any:
    def gil_free_simplejpeg(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return gil_free_simplejpeg


def gil_share(root: Path, names: list[str], args: argparse.Namespace) -> tuple[float, float]:
    """At most this share of the encoding task's time holds the GIL; the scaling bound.

    One thread, one profiled pass, so the figure does not depend on free cores: the
    time inside Pillow's GIL-free C calls against the whole pass. The profiler's own
    overhead counts as held, so the share is an upper bound. With a share ``f`` held, N
    threads encode at most ``1 / (f + (1 - f) / N)`` times as fast as one (Amdahl); with
    the upper bound, that is a lower bound on what the GIL allows.
    """
    import cProfile
    import pstats

    encode = args.encodings.split(",")[0]
    tasks = [(i, [str(root / n)], args.size, args.size, 3, encode, args.quality, True)
             for i, n in enumerate(names)]  # fmt: skip
    # simplejpeg's functions (Cython) are invisible to cProfile, their time would count as
    # the caller's: a Python wrapper's own time is theirs (plus the wrapper's call)
    sj = simplejpeg_module()
    real = {name: getattr(sj, name) for name in _SIMPLEJPEG_GIL_FREE} if sj else {}
    for name, fn in real.items():
        setattr(sj, name, _gil_free_wrapper(fn))
    profile = cProfile.Profile()
    try:
        start = time.perf_counter()
        profile.runcall(lambda: [_encode_task(task) for task in tasks])
        total = time.perf_counter() - start
    finally:
        for name, fn in real.items():
            setattr(sj, name, fn)
    stats: Any = pstats.Stats(profile).stats  # {(file, line, name): (cc, nc, tt, ct, callers)}
    free = sum(
        row[2]
        for (file, _, name), row in stats.items()
        if (file == "~" and any(f"'{m}' of 'Imaging" in name for m in _GIL_FREE))
        or name == "gil_free_simplejpeg"
    )
    share = max(0.0, 1.0 - free / total)
    return share, 1.0 / (share + (1.0 - share) / args.workers)


def configs(args: argparse.Namespace) -> list[tuple[str, int, str]]:
    """(encoding, workers, pool) of every pack run; workers=1 encodes in the calling thread."""
    runs = []
    for encode in args.encodings.split(","):
        runs.append((encode, 1, "threads"))
        runs += [(encode, args.workers, "threads"), (encode, args.workers, "processes")]
    return runs


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], dict[tuple[str, int, str], Any]]:
    """Make the source images, then time the baseline, a tar copy and every pack run."""
    rates: dict[tuple[str, int, str], list[float]] = {c: [] for c in configs(args)}
    sizes: dict[tuple[str, int, str], int] = {}
    base: dict[str, Any] = {
        "serial": [], "stage1": [], "stageN": [], "stageP": [], "stageW": [], "stageW0": [],
        "afterW": [], "afterW0": [], "start": [], "start_blas": [], "rows": [], "gil": []
    }  # fmt: skip
    procs = multiprocessing.get_context("fork").Pool(args.workers)
    procs.map(abs, range(args.workers))  # started before any timing
    with tempfile.TemporaryDirectory(prefix="scramjet-bench-") as tmp:
        root = Path(tmp)
        items = make_images(root, args.n, args.src_size, args.quality)
        base["loose_bytes"] = float(sum((root / n).stat().st_size for n, _ in items))
        start = time.perf_counter()
        urls = write_tars(root, items, shards=4)
        base["tar_rate"] = args.n / (time.perf_counter() - start)
        base["tar_bytes"] = float(sum(Path(u).stat().st_size for u in urls))
        names = [n for n, _ in items]
        order = list(rates)
        for r in range(args.rounds):
            base["serial"].append(serial_baseline(root, names, args.size, args.quality))
            for key, workers in (("stage1", 1), ("stageN", args.workers))[:: 1 - 2 * (r % 2)]:
                base[key].append(encode_stage(root, names, args, workers))
            base["stageP"].append(encode_stage_processes(root, names, args, procs))
            padded = (
                "stageW",
                lambda: encode_stage(root, names, args, args.workers, "processes", base["afterW"]),
            )
            unpadded = (
                "stageW0",
                lambda: encode_stage_unpadded(root, names, args, base["afterW0"]),
            )
            for key, stage in (padded, unpadded)[:: 1 - 2 * (r % 2)]:
                base[key].append(stage())
            for key, blas in (("start", False), ("start_blas", True))[:: 1 - 2 * (r % 2)]:
                base[key].append(worker_start(args.workers, blas))
            base["rows"].append(row_check(root))
            base["gil"].append(gil_share(root, names, args))
            for encode, workers, pool in order[r % len(order) :] + order[: r % len(order)]:
                dst = root / f"{encode}-{workers}-{pool}-{r}.pack"
                report = pack(
                    root,
                    root / "list.csv",
                    dst,
                    dtype=["int64"],
                    height=args.size,
                    width=args.size,
                    encode=encode,
                    quality=args.quality,
                    shards=4,
                    workers=workers,
                    pool=pool,
                    progress=False,
                )
                rates[(encode, workers, pool)].append(report.num_samples / report.seconds)
                sizes[(encode, workers, pool)] = report.bytes
                shutil.rmtree(dst)
    procs.terminate()
    return base, {c: (rates[c], sizes[c]) for c in rates}


def _rate(values: list[float]) -> str:
    return f"{statistics.median(values):>10.0f} {min(values):>6.0f}-{max(values):<6.0f}"


def report(args: argparse.Namespace, base: dict[str, Any], runs: dict[Any, Any]) -> None:
    n, serial = args.n, statistics.median(base["serial"])
    print(f"{n} synthetic {args.src_size}x{args.src_size} JPEGs (quality {args.quality})")
    print(f"packed to {args.size}x{args.size}, 4 shards; median of {args.rounds} rounds")
    print(
        f"{'method':<40} {'samples/s':>10} {'range':^13} {'vs serial':>9} {'MB on disk':>10} "
        f"{'bytes/sample':>12}"
    )
    print(f"{'serial PIL resize+encode (baseline)':<40} {_rate(base['serial'])} {1.0:>8.2f}x")
    loose = base["loose_bytes"]
    print(
        f"{'loose source files':<40} {'-':>10} {'':13} {'-':>9} {loose / 1e6:>10.1f} {loose / n:>12.0f}"
    )
    tar_rate, tar_bytes = base["tar_rate"], base["tar_bytes"]
    print(
        f"{'tar shards of the sources (copy)':<40} {tar_rate:>10.0f} {'':13} "
        f"{tar_rate / serial:>8.2f}x {tar_bytes / 1e6:>10.1f} {tar_bytes / n:>12.0f}"
    )
    for (encode, workers, pool), (rates, size) in runs.items():
        name = (
            f"pack {encode}, workers=1 (in-process)"
            if workers == 1
            else (f"pack {encode}, workers={workers}, {pool}")
        )
        ratio = statistics.median(rates) / serial
        print(f"{name:<40} {_rate(rates)} {ratio:>8.2f}x {size / 1e6:>10.1f} {size / n:>12.0f}")
    w, first = args.workers, args.encodings.split(",")[0]
    one, many = statistics.median(base["stage1"]), statistics.median(base["stageN"])
    print(
        f"scaling, encoding stage only ({first}, threads): 1 worker {one:.0f}/s, {w} workers "
        f"{many:.0f}/s = {many / (w * one):.2f} x {w} x one worker's (target 0.90)"
    )
    in_procs = statistics.median(base["stageP"])
    print(
        f"  the same encoding in {w} processes at once (no GIL): {in_procs:.0f}/s = "
        f"{in_procs / (w * one):.2f} x {w} x one worker's: how far this machine's cores scale; "
        f"{w} threads reach {many / in_procs:.2f}x of it"
    )
    workers = statistics.median(base["stageW"])
    print(
        f"  the same encoding in pack's {w} worker processes (pool='processes', their start "
        f"included): {workers:.0f}/s = {workers / (w * one):.2f} x {w} x one worker's; "
        f"they start in {statistics.median(base['start']):.2f} s (median; "
        f"{statistics.median(base['start_blas']):.2f} s with a BLAS thread per core, as "
        f"before); from their first "
        f"result on: {statistics.median(base['afterW']):.0f}/s = "
        f"{statistics.median(base['afterW']) / many:.2f}x the {w} threads' whole stage"
    )
    unpadded, after0 = statistics.median(base["stageW0"]), statistics.median(base["afterW0"])
    print(
        f"  the same worker processes without their heap padding (as before; glibc faults each "
        f"freed image in again): {unpadded:.0f}/s = {unpadded / (w * one):.2f} x {w} x one "
        f"worker's; from the first result on {after0:.0f}/s; padded / unpadded "
        f"{workers / unpadded:.2f}x (from the first result on "
        f"{statistics.median(base['afterW']) / after0:.2f}x)"
    )
    plain = statistics.median(r[0] for r in base["rows"])
    check = statistics.median(r[1] for r in base["rows"])
    print(
        f"checking the CSV rows (serial, before encoding): {check:.1f} us per row, against "
        f"{plain:.1f} for a plain pathlib check of the paths alone = {plain / check:.2f}x"
    )
    share = statistics.median(g[0] for g in base["gil"])
    bound = statistics.median(g[1] for g in base["gil"])
    print(
        f"GIL held for at most {share:.1%} of the encoding task (1 thread, profiled): the GIL "
        f"lets {w} threads encode at least {bound:.2f}x one thread's rate = {bound / w:.2f} x "
        f"{w} x one worker's"
    )
    for encode in args.encodings.split(","):
        whole_one = statistics.median(runs[(encode, 1, "threads")][0])
        whole_many = statistics.median(runs[(encode, w, "threads")][0])
        print(
            f"scaling, whole pack ({encode}, threads): {whole_many / (w * whole_one):.2f} x "
            f"{w} x one worker's ({whole_one:.0f}/s -> {whole_many:.0f}/s)"
        )
    print(f"threads / processes, workers={args.workers} (median samples/s ratio):")
    for encode in args.encodings.split(","):
        threads = statistics.median(runs[(encode, args.workers, "threads")][0])
        procs = statistics.median(runs[(encode, args.workers, "processes")][0])
        one = statistics.median(runs[(encode, 1, "threads")][0])
        print(
            f"  {encode:<5} threads {threads:.0f}/s, processes {procs:.0f}/s: "
            f"{threads / procs:.2f}x  (workers=1: {one:.0f}/s; threads {threads / one:.2f}x "
            f"of it, processes {procs / one:.2f}x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512, help="images (default 512)")
    parser.add_argument("--src-size", type=int, default=256, help="source image side")
    parser.add_argument("--size", type=int, default=224, help="packed image side")
    parser.add_argument("--workers", type=int, default=2, help="encoding workers")
    parser.add_argument("--quality", type=int, default=90)
    parser.add_argument("--rounds", type=int, default=3, help="runs of every configuration")
    parser.add_argument("--encodings", default="jpeg,png,raw", help="comma-separated")
    parser.add_argument(
        "--encoder",
        choices=("auto", "pil"),
        default="auto",
        help="auto: simplejpeg where installed (pack's default); pil: Pillow only",
    )
    args = parser.parse_args()
    if args.encoder == "pil":
        hide = Path(tempfile.mkdtemp(prefix="scramjet-bench-pil-"))
        (hide / "simplejpeg.py").write_text('raise ImportError("hidden by --encoder pil")\n')
        sys.path.insert(0, str(hide))  # pack's worker processes start with this import path
        sys.modules["simplejpeg"] = None  # type: ignore[assignment]  # and this process
    torch.set_num_threads(1)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    base, runs = measure(args)
    after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    sj = simplejpeg_module()
    path = f"simplejpeg {sj.__version__}" if sj else "Pillow only (no simplejpeg)"
    print(f"machine: {machine()}, Pillow {PIL.__version__}; JPEG path: {path}")
    print(f"load average (1 min): {load:.2f} before, {after:.2f} after")
    report(args, base, runs)


if __name__ == "__main__":
    main()
