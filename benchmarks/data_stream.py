"""Streaming images from S3: scramjet packs vs LitData vs MosaicML Streaming vs local disk.

One run, the same synthetic 224x224 JPEG images for everyone, each converted with its own
tool (``pack``, ``litdata.optimize``, ``streaming.MDSWriter``) into about the same number
of shards, uploaded to a moto S3 server on 127.0.0.1 (a separate process), then read
back with the same number of DataLoader workers and the same batch size, shuffled. Each
reader runs in a fresh child process with an empty cache directory and reports:

- time to the first batch, cold (empty cache, fresh process);
- epoch 1 samples/s (cold cache: downloads included) and epoch 2 samples/s (warm cache);
- bytes the S3 server sent during each epoch, divided by the size of the reader's own
  shards (1.0 = every byte downloaded once per epoch; read from the server process's
  ``/proc/<pid>/io`` write counter, so every reader is counted the same way);
- resume: a fresh process with an empty cache, restored to the middle of epoch 1 with the
  reader's own resume mechanism, until its first batch.

Rows: ``scramjet`` (``ds.loader``'s default: ``--workers`` reading threads in the training
process; default ``shuffle_window=8``), ``scramjet-proc`` (the same with
``--workers`` DataLoader worker processes, ``persistent_workers=True``), ``scramjet-w2``
(``shuffle_window=2``: a faster start for a coarser shuffle, see docs/streaming.md),
``scramjet-local`` (the same pack from local disk, warm page cache), ``litdata``,
``mosaic``. Every reader decodes the
JPEG bytes with simplejpeg (the peers in their collate function).
``--install-peers`` installs LitData and MosaicML Streaming (and the small modules they
import) into ``.bench/peers`` with ``pip --target --no-deps``: nothing is resolved into
this environment and torch is never replaced. MosaicML Streaming's top-level import pulls
in torchvision for its vision dataset classes (unused here); torchvision is not installed
in this environment, so that one sub-package is replaced by an empty module.

    .venv/bin/python benchmarks/data_stream.py --install-peers      # once
    .venv/bin/python benchmarks/data_stream.py --images 2048 --workers 2 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
PEER_DIR = str(HERE.parent / ".bench" / "peers")
PEER_PACKAGES = [
    "litdata", "mosaicml-streaming", "lightning-utilities", "zstd", "xxhash",
    "python-snappy", "cramjam", "brotli", "catalogue",
]  # fmt: skip
BUCKET = "bench"


# -- the S3 server ---------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    """moto's S3 server in a child process (so it does not share this process's GIL)."""
    port = free_port()
    code = (
        "import time\nfrom moto.server import ThreadedMotoServer\n"
        f"ThreadedMotoServer(ip_address='127.0.0.1', port={port}, verbose=False).start()\n"
        "time.sleep(10**9)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.DEVNULL)
    for _ in range(200):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"http://127.0.0.1:{port}"
        time.sleep(0.05)
    raise RuntimeError("the moto S3 server did not start")


class CountingProxy:
    """A TCP proxy in front of the S3 server that counts the bytes the server sends.

    The count lives in an 8-byte file mapped into memory, so the reader processes read
    it live (:func:`server_sent`) at the start and end of each epoch.
    """

    def __init__(self, upstream: int, counter: Path) -> None:
        counter.write_bytes(b"\0" * 8)
        self.count = np.memmap(counter, dtype=np.int64, mode="r+", shape=(1,))
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.upstream = upstream
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            server = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, count: bool) -> None:
        try:
            while data := src.recv(1 << 20):
                dst.sendall(data)
                if count:
                    with self.lock:
                        self.count[0] += len(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def server_sent(counter: str) -> int:
    """Bytes the S3 server has sent through the proxy so far."""
    return int(np.memmap(counter, dtype=np.int64, mode="r", shape=(1,))[0])


def s3fs_upload(local: Path, url: str) -> int:
    """Upload a folder; returns its size in bytes."""
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    total = 0
    for path in sorted(local.rglob("*")):
        if path.is_file():
            fs.put_file(str(path), f"{url[5:]}/{path.relative_to(local)}")
            total += path.stat().st_size
    return total


# -- converting the images with each tool ---------------------------------------------
def convert_all(root: Path, n_images: int, shards: int, peers: bool) -> dict[str, int]:
    """Images, then each reader's own shards on S3; returns each one's bytes."""
    sys.path.insert(0, str(HERE))
    from data_read import make_images

    from scramjet.data import pack

    items = make_images(root / "src", n_images, 224, 90)
    opts = dict(dtype=["int64"], height=224, width=224, quality=90, shards=shards, progress=False)
    report = pack(root / "src", root / "src" / "list.csv", f"s3://{BUCKET}/sj.pack", **opts)
    pack(root / "src", root / "src" / "list.csv", root / "local.pack", **opts)
    sizes = {"scramjet": report.bytes}
    if not peers:
        return sizes
    chunk = max(1, report.bytes // shards)
    files = [str(root / "src" / name) for name, _ in items]
    labels = [label for _, label in items]
    sizes["litdata"] = convert_litdata(root, files, labels, chunk)
    sizes["mosaic"] = convert_mosaic(root, files, labels, chunk)
    return sizes


def _lit_item(arg: tuple[str, int]) -> dict[str, Any]:
    return {"image": Path(arg[0]).read_bytes(), "label": arg[1]}  # the JPEG's own bytes


def convert_litdata(root: Path, files: list[str], labels: list[int], chunk: int) -> int:
    import litdata

    out = root / "lit"
    litdata.optimize(fn=_lit_item, inputs=list(zip(files, labels)), output_dir=str(out),
                     chunk_bytes=chunk, num_workers=1, verbose=False)  # fmt: skip
    return s3fs_upload(out, f"s3://{BUCKET}/lit")


def convert_mosaic(root: Path, files: list[str], labels: list[int], chunk: int) -> int:
    from streaming import MDSWriter

    out = root / "mds"
    columns = {"image": "bytes", "label": "int"}  # the JPEG's own bytes, as for LitData
    with MDSWriter(out=str(out), columns=columns, size_limit=chunk) as writer:
        for file, label in zip(files, labels):
            writer.write({"image": Path(file).read_bytes(), "label": label})
    return s3fs_upload(out, f"s3://{BUCKET}/mds")


# -- readers (in a child process each) ------------------------------------------------
def to_batch(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Peers' samples to a batch, decoding the JPEG bytes with simplejpeg (as scramjet)."""
    import simplejpeg
    import torch

    images = np.empty((len(samples), 224, 224, 3), np.uint8)
    for i, s in enumerate(samples):
        images[i] = simplejpeg.decode_jpeg(bytes(s["image"]), colorspace="RGB")
    return {"image": torch.from_numpy(images), "label": torch.tensor([s["label"] for s in samples])}


def scramjet_reader(
    args: argparse.Namespace, cache: Path, local: bool, window: int | None, processes: bool = False
) -> Any:
    from scramjet.data import PackedDataset
    from scramjet.trainer.data_order import EpochSampler

    path: str = str(Path(args.root) / "local.pack") if local else f"s3://{BUCKET}/sj.pack"
    ds = PackedDataset(path, cache_dir=cache, shuffle_window=window)
    sampler = EpochSampler(ds, shuffle=True, seed=0)
    if processes:  # DataLoader worker processes, batches through reused shared slots
        loader = ds.loader(args.batch, sampler=sampler, num_workers=args.workers,
                           persistent_workers=True)  # fmt: skip
    else:  # the default: as many reading threads in this process as there are workers
        loader = ds.loader(args.batch, sampler=sampler, num_workers=args.workers)

    class Reader:
        seen = 0

        def epoch(self, e: int) -> Iterable[Any]:
            sampler.set_epoch(e)
            return loader

        def state(self) -> Any:
            return {"epoch": sampler.epoch, "consumed": self.seen}

        def restore(self, state: Any) -> Iterable[Any]:
            sampler.set_epoch(state["epoch"])
            sampler.set_consumed(state["consumed"])
            return loader

    return Reader()


def litdata_reader(args: argparse.Namespace, cache: Path) -> Any:
    from litdata import StreamingDataLoader, StreamingDataset
    from litdata.streaming.resolver import Dir

    ds = StreamingDataset(Dir(path=str(cache), url=f"s3://{BUCKET}/lit"), shuffle=True, seed=0)
    loader = StreamingDataLoader(ds, batch_size=args.batch, num_workers=args.workers,
                                 collate_fn=to_batch)  # fmt: skip

    class Reader:
        def epoch(self, e: int) -> Iterable[Any]:
            return loader

        def state(self) -> Any:
            return loader.state_dict()

        def restore(self, state: Any) -> Iterable[Any]:
            loader.load_state_dict(state)
            return loader

    return Reader()


def mosaic_reader(args: argparse.Namespace, cache: Path) -> Any:
    from streaming import StreamingDataLoader, StreamingDataset

    ds = StreamingDataset(remote=f"s3://{BUCKET}/mds", local=str(cache), shuffle=True,
                          shuffle_seed=0, batch_size=args.batch, num_canonical_nodes=1)  # fmt: skip
    loader = StreamingDataLoader(ds, batch_size=args.batch, num_workers=args.workers,
                                 collate_fn=to_batch)  # fmt: skip

    class Reader:
        def epoch(self, e: int) -> Iterable[Any]:
            return loader

        def state(self) -> Any:
            return loader.state_dict()

        def restore(self, state: Any) -> Iterable[Any]:
            loader.load_state_dict(state)
            return loader

    return Reader()


def measure_epochs(reader: Any, counter: str, start: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for epoch in (0, 1):
        sent, t0, count, first = server_sent(counter), time.perf_counter(), 0, None
        for batch in reader.epoch(epoch):
            count += len(batch["label"])
            if first is None:
                first = time.perf_counter() - (start if epoch == 0 else t0)
        seconds = time.perf_counter() - (start if epoch == 0 else t0)
        out[f"epoch{epoch + 1}"] = {"samples": count, "samples_per_s": count / seconds,
                                    "first_batch_s": first,
                                    "server_bytes": server_sent(counter) - sent}  # fmt: skip
    return out


def child(args: argparse.Namespace) -> None:
    """Measure one reader (mode ``run``, ``save`` or ``resume``); print one JSON line."""
    os.environ["S3_ENDPOINT_URL"] = os.environ["AWS_ENDPOINT_URL"]  # MosaicML's variable
    if os.path.isdir(PEER_DIR):
        sys.path.append(PEER_DIR)  # after this environment's packages: its torch wins
        sys.modules.setdefault("streaming.vision", types.ModuleType("streaming.vision"))
    name, mode = args.child, args.mode
    cache = Path(args.root) / f"cache-{name}"  # the same path when resuming (LitData checks)
    shutil.rmtree(cache, ignore_errors=True)  # but empty: a fresh machine
    cache.mkdir()
    factories: dict[str, Callable[[], Any]] = {
        "scramjet": lambda: scramjet_reader(args, cache, False, args.window),
        "scramjet-proc": lambda: scramjet_reader(args, cache, False, args.window, True),
        "scramjet-w2": lambda: scramjet_reader(args, cache, False, 2),
        "scramjet-local": lambda: scramjet_reader(args, cache, True, args.window),
        "litdata": lambda: litdata_reader(args, cache),
        "mosaic": lambda: mosaic_reader(args, cache),
    }
    start = time.perf_counter()
    reader = factories[name]()
    out: dict[str, Any] = {"name": name}
    state_file = Path(args.root) / f"state-{name}.pkl"
    if mode == "run":
        out.update(measure_epochs(reader, args.counter, start))
    elif mode == "save":  # half of epoch 1, then the reader's own resume state
        for n, batch in enumerate(reader.epoch(0)):
            reader.seen = (n + 1) * len(batch["label"])
            if reader.seen >= args.images // 2:
                break
        state_file.write_bytes(pickle.dumps(reader.state()))
    else:  # a fresh process with an empty cache resumes there
        batches = reader.restore(pickle.loads(state_file.read_bytes()))
        next(iter(batches))
        out["resume_first_batch_s"] = time.perf_counter() - start
    print(json.dumps(out), flush=True)
    os._exit(0)  # leave the loader's workers behind without draining them


def run_child(args: argparse.Namespace, name: str, mode: str, env: dict[str, str]) -> Any:
    cmd = [sys.executable, __file__, "--child", name, "--root", args.root, "--images",
           str(args.images), "--batch", str(args.batch), "--workers", str(args.workers),
           "--counter", args.counter, "--mode", mode]  # fmt: skip
    cmd += ["--window", str(args.window)] if args.window else []
    # The children's temp files go under the root, removed at the end: their killed
    # workers never remove their own (multiprocessing's pymp-* folders).
    temp = Path(args.root) / "tmp"
    temp.mkdir(exist_ok=True)
    env = {**env, "TMPDIR": str(temp)}
    # A session of its own: the DataLoader workers a child leaves behind (it exits without
    # draining them) are killed with it, instead of slowing down the next reader measured.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        stdout, stderr = "", "timed out after 900 s"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"name": name, "error": (stderr or stdout).strip()[-600:]}
    return json.loads(lines[-1])


# -- the report ------------------------------------------------------------------------
def median_round(
    rounds: list[tuple[list[dict[str, Any]], dict[str, Any]]],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Each number is its median over the rounds (a reader that failed once is left out)."""
    results, resumes = [], {}
    for i, first in enumerate(rounds[0][0]):
        runs = [rnd[0][i] for rnd in rounds]
        if any("error" in run for run in runs):
            results.append(next(run for run in runs if "error" in run))
            continue
        merged: dict[str, Any] = {"name": first["name"]}
        for e in ("epoch1", "epoch2"):
            merged[e] = {k: float(np.median([run[e][k] for run in runs])) for k in first[e]}
        results.append(merged)
    for name in rounds[0][1]:
        values = [rnd[1][name].get("resume_first_batch_s") for rnd in rounds]
        if None not in values:
            resumes[name] = {"resume_first_batch_s": float(np.median(values))}
    return results, resumes


def report(results: list[dict[str, Any]], sizes: dict[str, int], resumes: dict[str, Any]) -> None:
    print(f"\n{'reader':16} {'first batch s':>13} {'epoch 1 /s':>11} {'epoch 2 /s':>11} "
          f"{'resume s':>9} {'bytes/size e1':>14} {'e2':>6}")  # fmt: skip
    for r in results:
        if "error" in r:
            print(f"{r['name']:16} not measured: {r['error']}")
            continue
        size = sizes.get(r["name"].split("-")[0], 0) or 1
        e1, e2 = r["epoch1"], r["epoch2"]
        res = resumes.get(r["name"], {}).get("resume_first_batch_s")
        remote = r["name"] != "scramjet-local"
        ratio1 = f"{e1['server_bytes'] / size:14.3f}" if remote else f"{'-':>14}"
        ratio2 = f"{e2['server_bytes'] / size:6.3f}" if remote else f"{'-':>6}"
        print(f"{r['name']:16} {e1['first_batch_s']:13.2f} {e1['samples_per_s']:11.0f} "
              f"{e2['samples_per_s']:11.0f} {res if res is None else round(res, 2)!s:>9} "
              f"{ratio1} {ratio2}")  # fmt: skip
    by = {r["name"]: r for r in results if "error" not in r}
    if "scramjet" in by:
        sj = by["scramjet"]
        peers = [by[p] for p in ("litdata", "mosaic") if p in by]
        for e in ("epoch1", "epoch2"):
            if peers:
                best = max(p[e]["samples_per_s"] for p in peers)
                print(f"{e}: scramjet / faster peer = {sj[e]['samples_per_s'] / best:.2f}x")
        if "scramjet-proc" in by:
            proc = by["scramjet-proc"]
            print("scramjet threads / worker processes: " + ", ".join(
                f"{e} {sj[e]['samples_per_s'] / proc[e]['samples_per_s']:.2f}x"
                for e in ("epoch1", "epoch2")) + f", first batch {sj['epoch1']['first_batch_s']:.2f}"
                f" vs {proc['epoch1']['first_batch_s']:.2f} s")  # fmt: skip
        if "scramjet-local" in by:
            local = by["scramjet-local"]["epoch2"]["samples_per_s"]
            print(f"epoch2: scramjet S3 (warm cache) / local disk = "
                  f"{sj['epoch2']['samples_per_s'] / local:.2f}x")  # fmt: skip


def shuffle_quality(shards: int = 64, per_shard: int = 512, batch: int = 64) -> None:
    """How close shard-window shuffles come to a full shuffle (no I/O, exact counts)."""
    import torch

    from scramjet.trainer.data_order import shard_window_order

    print(f"{shards} shards of {per_shard} samples; batch {batch}")
    print(f"{'window':>6} {'neighbours from the same shard':>31} {'shards per batch':>17}")
    for window in (1, 2, 4, 8, 16, 32, shards):
        order = np.asarray(shard_window_order([per_shard] * shards, window,
                                              torch.Generator().manual_seed(0)))  # fmt: skip
        shard = order // per_shard
        same = float(np.mean(shard[1:] == shard[:-1]))
        rows = shard[: len(shard) // batch * batch].reshape(-1, batch)
        spread = float(np.mean([len(np.unique(row)) for row in rows]))
        print(f"{window:>6} {same:>30.1%} {spread:>17.1f}")


def install_peers() -> None:
    """LitData and MosaicML Streaming into .bench/peers, without touching this environment."""
    os.makedirs(PEER_DIR, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--upgrade"]
    subprocess.run([*cmd, "--target", PEER_DIR, *PEER_PACKAGES], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=2048)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1, help="rounds; medians printed")
    parser.add_argument("--window", type=int, help="scramjet's shuffle_window (its default: 8)")
    parser.add_argument("--install-peers", action="store_true", help=install_peers.__doc__)
    parser.add_argument("--no-peers", action="store_true", help="measure scramjet only")
    parser.add_argument("--shuffle-quality", action="store_true", help=shuffle_quality.__doc__)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--counter", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="run", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    if args.shuffle_quality:
        return shuffle_quality()
    if args.install_peers:
        install_peers()
    sys.path.insert(0, str(HERE))
    from data_read import machine

    peers = not args.no_peers and os.path.isdir(PEER_DIR)
    if peers:
        sys.path.append(PEER_DIR)
        sys.modules.setdefault("streaming.vision", types.ModuleType("streaming.vision"))
    print(f"machine: {machine()}\nload average (1 min) before: {os.getloadavg()[0]:.2f}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up below when stopped
    server, endpoint = start_server()
    root = Path(tempfile.mkdtemp(prefix="scramjet-stream-bench-"))
    proxy = CountingProxy(int(endpoint.rsplit(":", 1)[1]), root / "counter")
    endpoint = f"http://127.0.0.1:{proxy.port}"
    env = {**os.environ, "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "bench",
           "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
           "OMP_NUM_THREADS": "1"}  # fmt: skip
    os.environ.update(env)
    try:
        import boto3

        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
        sizes = convert_all(root, args.images, args.shards, peers)
        print("bytes of each reader's shards:", sizes)
        args.root, args.counter = str(root), str(root / "counter")
        names = ["scramjet", "scramjet-proc", "scramjet-w2", "scramjet-local"]
        names += ["litdata", "mosaic"] if peers else []
        rounds: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []
        for r in range(args.rounds):  # the readers alternate within each round
            results = [run_child(args, name, "run", env) for name in names]
            resumes = {}
            for name in [n for n in names if n != "scramjet-local"]:
                saved = run_child(args, name, "save", env)
                resumes[name] = saved if "error" in saved else run_child(args, name, "resume", env)
            print(f"\nround {r + 1} (load average {os.getloadavg()[0]:.2f}):", end="")
            report(results, sizes, resumes)
            rounds.append((results, resumes))
        if len(rounds) > 1:
            print("\nmedian over the rounds:", end="")
            medians, resume_medians = median_round(rounds)
            report(medians, sizes, resume_medians)
        for name, value in rounds[-1][1].items():
            if "error" in value:
                print(f"resume of {name} not measured: {value['error']}")
    finally:
        server.terminate()
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average (1 min) after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
