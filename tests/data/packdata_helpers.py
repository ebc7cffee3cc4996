"""Synthetic image folders and CSV lists for the packed-dataset tests (helpers)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from scramjet.data.writer import _encode_task


def smooth_image(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A smooth RGB image (gradients plus mild noise): realistic for JPEG quality checks."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    phase = rng.uniform(0, 6.28, size=3)
    freq = rng.uniform(0.02, 0.08, size=3)
    chans = [127 + 100 * np.sin(freq[c] * x + phase[c]) * np.cos(freq[c] * y) for c in range(3)]
    img = np.stack(chans, axis=-1) + rng.normal(0, 2, size=(height, width, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def write_images(
    folder: Path,
    n: int,
    size: tuple[int, int] = (32, 40),
    seed: int = 0,
    fmt: str = "png",
    prefix: str = "img",
) -> list[tuple[str, np.ndarray]]:
    """Write ``n`` images into ``folder``; returns (relative name, pixels) pairs."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        arr = smooth_image(rng, *size)
        name = f"{prefix}_{i}.{fmt}"
        Image.fromarray(arr).save(folder / name, quality=98) if fmt == "jpg" else Image.fromarray(
            arr
        ).save(folder / name)
        out.append((name, arr))
    return out


def write_csv(path: Path, header: list[str], rows: list[list[str]], sep: str = "\t") -> Path:
    """Write a CSV list; cells containing the separator or a comma are quoted."""

    def cell(c: str) -> str:
        return f'"{c}"' if ("," in c or sep in c) else c

    lines = [sep.join(header)] + [sep.join(cell(c) for c in r) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def encode_or_die(task: tuple[Any, ...]) -> tuple[int, Any]:
    """Pack's encoding task, except that the worker is SIGKILLed on a file named ``die*``.

    Stands in for a worker killed by the OOM killer or a crashing decoder; it is pickled by
    reference, so pack's worker processes import it from this module.
    """
    if any(os.path.basename(f).startswith("die") for f in task[1]):
        os.kill(os.getpid(), signal.SIGKILL)
    return _encode_task(task)  # type: ignore[arg-type]


def start_in_session(script: str, *args: object, stdout: Any = None) -> subprocess.Popen[str]:
    """``python -c script args...`` in a session of its own, its stderr piped as text: a
    signal to the session reaches the script and every process it started. SIGINT is
    handled as in a terminal's foreground job, even where the test runner was started with
    it ignored (a background job of a shell)."""
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def cache_bytes(cache: Path) -> int:
    """Bytes of the shard files and downloads in progress in a shard cache, now."""
    total = 0
    for entry in os.scandir(cache):
        if entry.name.endswith((".h5", ".part")):
            with contextlib.suppress(FileNotFoundError):  # evicted or renamed meanwhile
                total += entry.stat().st_size
    return total


@contextlib.contextmanager
def watching_cache(
    cache: Path, measure: Callable[[Path], int] | None = None
) -> Iterator[list[int]]:
    """Yields a one-item list holding the most bytes ``cache`` held so far (sampled every
    2 ms while the block runs); ``measure`` counts them (default :func:`cache_bytes`)."""
    peak, stop = [0], threading.Event()
    count = measure or cache_bytes

    def watch() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], count(cache))
            stop.wait(0.002)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        yield peak
    finally:
        stop.set()
        watcher.join()


def read_epochs_watching_cache(ds: Any, cache: Path, epochs: int = 2) -> tuple[list[int], int]:
    """Labels of ``epochs`` shuffled epochs of a streamed pack read sample by sample, and
    the most bytes its cache held meanwhile (sampled every 2 ms)."""
    from scramjet.trainer.data_order import EpochSampler

    with watching_cache(cache) as peak:
        sampler = EpochSampler(ds, shuffle=True, seed=2)
        seen: list[int] = []
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            seen += [int(ds[i]["label"]) for i in sampler]
    return seen, peak[0]


def small_pack(root: Path, csv: Path, dst: Path, **kw: Any) -> Any:
    """``pack`` with small defaults (6x8 images, int64 labels, in this process)."""
    from scramjet.data import pack

    opts: dict[str, Any] = {
        "dtype": ["int64"], "height": 6, "width": 8, "workers": 0, "progress": False
    }  # fmt: skip
    opts.update(kw)
    return pack(root, csv, dst, **opts)


def photo_folder(tmp_path: Path, n: int = 3) -> Path:
    """A user's folder: ``n`` RGB PNGs and ``list.csv`` (image, label)."""
    root = tmp_path / "photos"
    root.mkdir()
    rng = np.random.default_rng(0)
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)).save(root / f"{i}.png")
    (root / "list.csv").write_text("image,label\n" + "".join(f"{i}.png,{i}\n" for i in range(n)))
    return root


def raw_pack_of_images(tmp_path: Path, url: str, n: int, shards: int) -> str:
    """``n`` 32x32 images with their index as label, packed raw into ``shards`` shards at
    ``url`` (a local path or a store's URL); returns ``url``."""
    names = write_images(tmp_path / "imgs", n, size=(32, 32))
    csv = write_csv(tmp_path / "imgs" / "list.csv", ["image", "label"],
                    [[name, str(i)] for i, (name, _) in enumerate(names)])  # fmt: skip
    small_pack(tmp_path / "imgs", csv, url, height=32, width=32, encode="raw", shards=shards)
    return url
