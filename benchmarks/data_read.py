"""Read throughput of packed datasets against loose JPEG files, WebDataset and the machine.

One run, same synthetic images, same settings (workers, batch size, persistent workers,
warm page cache) for every reader; samples/s and ratios against loose JPEG files decoded
with PIL (ImageFolder style) are printed side by side. The pack is read by worker
processes (``backend="processes"``) and by threads in this process (``backend="threads"``,
the same number of threads as workers).

Two ceilings are measured in the same rounds: the single-thread simplejpeg decode rate of
the JPEG pack's own bytes, from memory into a batch buffer, times the usable cores (what
decoding alone allows), and a plain single-thread memory copy of the raw pack's pixels
into batch buffers (what moving the bytes alone allows). Beside the first, the same
decoding in N threads and in N processes at once shows how far the machine's cores
actually scale (on a shared virtual machine, two busy vCPUs can each run slower than one). FFCV is not measured: it does
not build here (docs/bench/data.md says why).

    .venv/bin/python benchmarks/data_read.py            # default: 1024 images, 2 workers
    .venv/bin/python benchmarks/data_read.py --n 4096 --workers 4
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import tarfile
import tempfile
import time
import warnings
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from scramjet.data import PackedDataset, pack


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cpu}, {cores} cores, torch {torch.__version__}, Python {platform.python_version()}"


def synthetic_image(rng: np.random.Generator, size: int) -> np.ndarray:
    """A photo-like image: smooth colour fields, edges and fine texture (no downloads)."""
    low = rng.uniform(0, 255, (size // 16, size // 16, 3)).astype(np.uint8)
    img = np.asarray(Image.fromarray(low).resize((size, size), Image.Resampling.BICUBIC), float)
    y, x = np.mgrid[0:size, 0:size]
    for _ in range(3):  # a few hard-edged discs
        cy, cx, r = rng.integers(0, size, 3)
        img[(y - cy) ** 2 + (x - cx) ** 2 < (r // 3) ** 2] = rng.uniform(0, 255, 3)
    img += rng.normal(0, 6, img.shape)  # sensor-like texture
    return np.clip(img, 0, 255).astype(np.uint8)


def make_images(root: Path, n: int, size: int, quality: int) -> list[tuple[str, int]]:
    rng = np.random.default_rng(0)
    (root / "images").mkdir(parents=True)
    items = []
    for i in range(n):
        name = f"images/{i:06d}.jpg"
        Image.fromarray(synthetic_image(rng, size)).save(root / name, quality=quality)
        items.append((name, i % 10))
    lines = ["image\tlabel"] + [f"{name}\t{label}" for name, label in items]
    (root / "list.csv").write_text("\n".join(lines) + "\n")
    return items


class LooseJPEGs(Dataset):
    """ImageFolder-style baseline: open each file with PIL, convert to RGB, to a tensor."""

    def __init__(self, root: Path, items: list[tuple[str, int]]) -> None:
        self.files = [str(root / name) for name, _ in items]
        self.labels = [label for _, label in items]

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> dict[str, Any]:
        with Image.open(self.files[i]) as img:
            arr = np.array(img.convert("RGB"))
        return {"image": torch.from_numpy(arr), "label": self.labels[i]}


def write_tars(root: Path, items: list[tuple[str, int]], shards: int) -> list[str]:
    urls = []
    for k, part in enumerate(np.array_split(np.arange(len(items)), shards)):
        url = str(root / f"wds-{k:04d}.tar")
        with tarfile.open(url, "w") as tar:
            for i in part:
                name, label = items[int(i)]
                for ext, data in (
                    ("jpg", (root / name).read_bytes()),
                    ("cls", str(label).encode()),
                ):
                    info = tarfile.TarInfo(f"{int(i):06d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        urls.append(url)
    return urls


def _simplejpeg_handler(key: str, data: bytes) -> Any:
    import simplejpeg

    if key.endswith("jpg"):
        return simplejpeg.decode_jpeg(data, colorspace="RGB")
    return None


def webdataset_loader(urls: list[str], batch: int, workers: int, fast: bool) -> DataLoader:
    import webdataset as wds

    decoder: Any = _simplejpeg_handler if fast else "rgb8"
    ds = (
        wds.WebDataset(urls, shardshuffle=False, empty_check=False)
        .decode(decoder)
        .to_tuple("jpg", "cls")
        .map_tuple(torch.from_numpy, int)
    )
    return DataLoader(ds, batch_size=batch, num_workers=workers, persistent_workers=workers > 0)


class DecodeFromMemory:
    """``threads`` threads decode the pack's own JPEG bytes, held in memory, into a batch
    buffer (each thread a contiguous part of every batch).

    With one thread, its samples/s times the usable cores is the decode ceiling of the
    machine; with one thread per core it is the decode rate the machine gives right now.
    """

    def __init__(self, path: Path, batch: int, threads: int = 1) -> None:
        from scramjet.data._gpu_decode import encoded_images

        ds = PackedDataset(path)
        col = ds.columns[0]
        self.blobs = encoded_images(ds, col, list(range(len(ds))))
        self.out = np.empty((batch, col.height or 0, col.width or 0, 3), np.uint8)
        self.batch, self.threads = batch, threads

    def _decode(self, blobs: list[np.ndarray], first: int) -> None:
        import simplejpeg

        for k, blob in enumerate(blobs):
            simplejpeg.decode_jpeg(blob, colorspace="RGB", buffer=self.out[first + k])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        with ThreadPoolExecutor(self.threads) as pool:
            for start in range(0, len(self.blobs), self.batch):
                part = self.blobs[start : start + self.batch]
                step = -(-len(part) // self.threads)
                jobs = [
                    pool.submit(self._decode, part[k : k + step], k)
                    for k in range(0, len(part), step)
                ]
                for job in jobs:
                    job.result()
                yield {"image": self.out[: len(part)]}


# The pack's JPEG bytes as one array and offsets, inherited by forked decoders (one object,
# so reading it does not copy pages of the parent's per-blob objects into every child).
_BLOBS: dict[str, np.ndarray] = {}


def _decode_range(span: tuple[int, int]) -> int:
    import simplejpeg

    data, offs, out = _BLOBS["data"], _BLOBS["offsets"], None
    for i in range(span[0], span[1]):
        out = simplejpeg.decode_jpeg(data[offs[i] : offs[i + 1]], colorspace="RGB", buffer=out)
    return span[1] - span[0]


class DecodeInProcesses:
    """``processes`` forked processes decode the pack's JPEG bytes from memory at once, each
    its part of every batch (the results stay there): what the machine's cores decode
    together with no GIL in the way. Its rate over the 1-thread rate is how far this
    machine's cores scale on decoding (2.0 on two fully free cores)."""

    def __init__(self, path: Path, batch: int, processes: int) -> None:
        import multiprocessing

        from scramjet.data._gpu_decode import encoded_images

        ds = PackedDataset(path)
        blobs = encoded_images(ds, ds.columns[0], list(range(len(ds))))
        _BLOBS["data"] = np.concatenate(blobs)
        _BLOBS["offsets"] = np.concatenate([[0], np.cumsum([len(b) for b in blobs])])
        self.n, self.batch, self.processes = len(ds), batch, processes
        self.pool = multiprocessing.get_context("fork").Pool(processes)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for start in range(0, self.n, self.batch):
            end = min(start + self.batch, self.n)
            step = -(-(end - start) // self.processes)
            spans = [(k, min(k + step, end)) for k in range(start, end, step)]
            done = sum(self.pool.map(_decode_range, spans))
            yield {"image": range(done)}


class CopyFromMemory:
    """One thread copies the raw pack's pixels, held in memory, into a batch buffer."""

    def __init__(self, path: Path, batch: int) -> None:
        ds = PackedDataset(path)
        self.pixels = np.stack([ds.read(i)["image"] for i in range(len(ds))])
        self.out = np.empty((batch, *self.pixels.shape[1:]), np.uint8)
        self.batch = batch

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for start in range(0, len(self.pixels), self.batch):
            part = self.pixels[start : start + self.batch]
            self.out[: len(part)] = part
            yield {"image": self.out[: len(part)]}


def epoch_rate(loader: Iterable[Any]) -> tuple[float, float]:
    """Samples/s of one pass over ``loader``, and this process's CPU time per sample (us).

    The CPU time counts every thread of this process and no other process: it is the
    whole cost of the readers that run in this process (threads, the main process, the
    ceilings), and only the main process's share for readers with worker processes.
    """
    start, cpu = time.perf_counter(), time.process_time()
    count = 0
    for b in loader:
        count += len(b["image"] if isinstance(b, dict) else b[0])
    cpu_us = (time.process_time() - cpu) / count * 1e6
    return count / (time.perf_counter() - start), cpu_us


def interleaved_rates(loaders: list[Iterable[Any]], rounds: int) -> list[tuple[float, float]]:
    """Median samples/s and CPU us/sample per loader; loaders take turns, so load from
    other processes on a shared machine hits all of them alike. One untimed warm-up
    epoch each first."""
    for loader in loaders:
        epoch_rate(loader)
    rates: list[list[tuple[float, float]]] = [[] for _ in loaders]
    for _ in range(rounds):
        for k, loader in enumerate(loaders):
            rates[k].append(epoch_rate(loader))
    return [
        (float(np.median([r for r, _ in rs])), float(np.median([c for _, c in rs]))) for rs in rates
    ]


def decode_rates(blobs: list[bytes]) -> dict[str, float]:
    """Single-thread JPEG decode rate (images/s) of each codec on the same bytes."""
    from scramjet.data.images import jpeg_decoder

    rates = {}
    for name in ("pil", "simplejpeg"):
        _, decode = jpeg_decoder(name)
        start = time.perf_counter()
        for b in blobs:
            decode(b, 3, None)
        rates[name] = len(blobs) / (time.perf_counter() - start)
    return rates


def build_readers(
    root: Path, items: list[tuple[str, int]], args: argparse.Namespace
) -> list[tuple[str, Iterable[Any]]]:
    """Every reader under test, as (name, loader); all use the same workers and batch."""
    common = {
        "dtype": ["int64"],
        "height": args.size,
        "width": args.size,
        "quality": args.quality,
        "shards": 4,
        "progress": False,
    }
    pack(root, root / "list.csv", root / "jpeg.pack", encode="jpeg", **common)
    pack(root, root / "list.csv", root / "raw.pack", encode="raw", **common)
    urls = write_tars(root, items, shards=4)
    gen = torch.Generator().manual_seed(0)
    persistent = args.workers > 0

    def map_loader(ds: Dataset) -> DataLoader:
        return DataLoader(
            ds,
            batch_size=args.batch,
            shuffle=True,
            generator=gen,
            num_workers=args.workers,
            persistent_workers=persistent,
        )

    def batched(path: str, decoder: str = "auto") -> Iterable[Any]:
        ds = PackedDataset(root / path, decoder=decoder)
        return ds.loader(
            args.batch,
            shuffle=True,
            generator=gen,
            num_workers=args.workers,
            persistent_workers=persistent,
            backend="processes",
        )

    def threaded(path: str) -> Iterable[Any]:
        ds = PackedDataset(root / path)
        return ds.loader(
            args.batch, shuffle=True, generator=gen, num_workers=args.workers, backend="threads"
        )

    return [
        ("loose JPEG files, PIL (ImageFolder style)", map_loader(LooseJPEGs(root, items))),
        (
            "WebDataset tar shards, PIL ('rgb8')",
            webdataset_loader(urls, args.batch, args.workers, False),
        ),
        (
            "WebDataset tar shards, simplejpeg",
            webdataset_loader(urls, args.batch, args.workers, True),
        ),
        ("pack jpeg, per-sample reads, simplejpeg", map_loader(PackedDataset(root / "jpeg.pack"))),
        ("pack jpeg, batched, processes, PIL", batched("jpeg.pack", "pil")),
        ("pack jpeg, batched, processes", batched("jpeg.pack")),
        ("pack jpeg, batched, threads", threaded("jpeg.pack")),
        ("pack raw, per-sample reads", map_loader(PackedDataset(root / "raw.pack"))),
        ("pack raw, batched, processes", batched("raw.pack")),
        # Not the same worker setting: raw pixels need no decoding, so reading them in the
        # main process skips the shared-memory transfer from workers (shown separately).
        (
            "pack raw, batched, main process only *",
            PackedDataset(root / "raw.pack").loader(
                args.batch, shuffle=True, generator=gen, backend="processes"
            ),
        ),
        ("pack raw, batched, threads", threaded("raw.pack")),
        (CEILING_JPEG, DecodeFromMemory(root / "jpeg.pack", args.batch)),
        (DECODE_NOW, DecodeFromMemory(root / "jpeg.pack", args.batch, args.workers)),
        (DECODE_PROCS, DecodeInProcesses(root / "jpeg.pack", args.batch, args.workers)),
        (CEILING_RAW, CopyFromMemory(root / "raw.pack", args.batch)),
    ]


CEILING_JPEG = "ceiling: simplejpeg decode from memory, 1 thread"
CEILING_RAW = "ceiling: memory copy of the raw pixels, 1 thread"
DECODE_NOW = "simplejpeg decode from memory, N threads"
DECODE_PROCS = "simplejpeg decode from memory, N processes"
IN_PROCESS = ("threads", "main process", "ceiling", "from memory")  # CPU time is all here


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def report(
    args: argparse.Namespace,
    results: list[tuple[str, tuple[float, float]]],
    codec: dict[str, float],
) -> None:
    print(f"machine: {machine()}")
    print(
        f"{args.n} synthetic {args.size}x{args.size} RGB images, JPEG quality {args.quality}, "
        f"batch {args.batch}, {args.workers} workers (processes or threads), warm page cache, "
        f"median of {args.epochs} interleaved epochs"
    )
    base = results[0][1][0]
    print(f"{'reader':<48} {'samples/s':>10} {'vs loose':>9} {'CPU us/sample':>14}")
    for name, (rate, cpu) in results:
        cpu_text = f"{cpu:>14.0f}" if any(k in name for k in IN_PROCESS) else f"{'-':>14}"
        print(f"{name:<48} {rate:>10.0f} {rate / base:>8.2f}x {cpu_text}")
    print("* reads in the main process (no workers); every other row uses the same workers")
    print("CPU us/sample: this process's CPU time, shown where every reading thread is in it")
    rate = {name: r for name, (r, _) in results}
    cpu = {name: c for name, (_, c) in results}
    cores = usable_cores()
    ceiling = rate[CEILING_JPEG] * cores
    threads, procs = rate["pack jpeg, batched, threads"], rate["pack jpeg, batched, processes"]
    print(
        f"JPEG ceiling: {rate[CEILING_JPEG]:.0f}/s x {cores} usable cores = {ceiling:.0f}/s; "
        f"pack jpeg threads {threads:.0f}/s = {threads / ceiling:.2f}x of it (target 0.85), "
        f"processes {procs:.0f}/s = {procs / ceiling:.2f}x; threads / processes "
        f"{threads / procs:.2f}x"
    )
    now = rate[DECODE_NOW]
    print(
        f"  decoding from memory on {args.workers} threads in the same rounds: {now:.0f}/s; "
        f"pack jpeg threads = {threads / now:.2f}x of it; CPU per image: decode alone "
        f"{cpu[CEILING_JPEG]:.0f} us, pack jpeg threads {cpu['pack jpeg, batched, threads']:.0f}"
        f" us ({cpu[CEILING_JPEG] / cpu['pack jpeg, batched, threads']:.2f}x)"
    )
    procs_now = rate[DECODE_PROCS]
    print(
        f"  decoding from memory in {args.workers} processes at once (no GIL): {procs_now:.0f}/s "
        f"= {procs_now / rate[CEILING_JPEG]:.2f}x one thread, so the cores scale to "
        f"{procs_now / ceiling:.2f}x of the ceiling; pack jpeg threads = "
        f"{threads / procs_now:.2f}x of it"
    )
    copy = rate[CEILING_RAW]
    raw_t, raw_p = rate["pack raw, batched, threads"], rate["pack raw, batched, processes"]
    print(
        f"raw ceiling (memory copy, 1 thread): {copy:.0f}/s; pack raw threads {raw_t:.0f}/s = "
        f"{raw_t / copy:.2f}x of it (target 0.8), processes {raw_p:.0f}/s = {raw_p / copy:.2f}x; "
        f"threads / processes {raw_t / raw_p:.2f}x"
    )
    wds_pil = rate["WebDataset tar shards, PIL ('rgb8')"]
    wds_fast = rate["WebDataset tar shards, simplejpeg"]
    print(
        f"pack jpeg (threads) vs WebDataset (PIL): {threads / wds_pil:.2f}x; "
        f"vs WebDataset (simplejpeg): {threads / wds_fast:.2f}x"
    )
    print(
        "single-thread JPEG decode of the loose files, images/s: "
        + ", ".join(f"{k} {v:.0f}" for k, v in codec.items())
        + f" (simplejpeg/PIL {codec['simplejpeg'] / codec['pil']:.2f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1024, help="images (default 1024)")
    parser.add_argument("--size", type=int, default=224, help="image side (default 224)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2, help="workers (or threads) for all")
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs per reader (median)")
    parser.add_argument("--quality", type=int, default=90, help="JPEG quality of all JPEGs")
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="scramjet-bench-") as tmp:
        root = Path(tmp)
        items = make_images(root, args.n, args.size, args.quality)
        readers = build_readers(root, items, args)
        rates = interleaved_rates([loader for _, loader in readers], args.epochs)
        results = [(name, r) for (name, _), r in zip(readers, rates)]
        codec = decode_rates([(root / name).read_bytes() for name, _ in items[:200]])
    print(f"load average (1 min): {load:.2f} before, {os.getloadavg()[0]:.2f} after")
    report(args, results, codec)


if __name__ == "__main__":
    main()
