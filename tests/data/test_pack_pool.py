"""pack's encoding pools: threads by default, processes on request, the same bytes.

Scripts written without an ``if __name__ == "__main__":`` guard (as nebulae's users
write them) pack completely, also with worker processes, which never run the script;
and a failure inside a worker names its row and cause.
"""

from __future__ import annotations

import hashlib
import io
import os
import platform
import random
import signal
import subprocess
import sys
import textwrap
import time
import traceback
from pathlib import Path

import numpy as np
import pytest
from pack_pool_helpers import blas_threads, die_on, encode_or_raise, heap_faults, where_am_i
from packdata_helpers import smooth_image, start_in_session, write_csv, write_images
from PIL import Image

import scramjet.data.writer as writer
from scramjet.data import PackedDataset, PackError, _pool, pack
from scramjet.data.images import encode_image

UNGUARDED = textwrap.dedent("""
    import sys
    from scramjet.data import pack

    print("script body runs")
    report = pack(sys.argv[1], sys.argv[2], sys.argv[3], dtype=["int64"], height=16,
                  width=16, shards=2, workers=WORKERS, pool=POOL, progress=False)
    print("packed", report.num_samples)
""")

GUARDED = textwrap.dedent("""
    import sys
    from scramjet.data import pack

    print("script body runs")
    if __name__ == "__main__":
        report = pack(sys.argv[1], sys.argv[2], sys.argv[3], dtype=["int64"], height=16,
                      width=16, shards=2, workers=WORKERS, pool=POOL, progress=False)
        print("packed", report.num_samples)
""")


@pytest.mark.parametrize(
    "template,workers,pool",
    [
        (UNGUARDED, 2, "threads"),
        (UNGUARDED, 0, "threads"),
        (UNGUARDED, 2, "processes"),
        (GUARDED, 2, "processes"),
    ],
    ids=["unguarded-2-threads", "unguarded-0", "unguarded-2-processes", "guarded-2-processes"],
)
def test_a_script_without_main_guard_packs_completely(folder, tmp_path, template, workers, pool):
    root, imgs = folder
    script = tmp_path / "make_pack.py"
    code = template.replace("WORKERS", str(workers)).replace("POOL", repr(pool))
    script.write_text(code)
    dst = tmp_path / "out.pack"
    done = subprocess.run(
        [sys.executable, str(script), str(root), str(root / "list.csv"), str(dst)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    # The script ran once: worker processes import scramjet's encoding code, never the
    # script (it would print "script body runs" again, and pack again without the guard).
    assert done.stdout.count("script body runs") == 1, done.stdout
    assert done.stdout.count("packed 12") == 1, done.stdout
    assert "Warning" not in done.stderr, done.stderr
    ds = PackedDataset(dst, verify=True)
    assert len(ds) == len(imgs) and [s.samples for s in ds.manifest.shards] == [6, 6]
    assert [ds[i]["label"] for i in range(len(ds))] == [i % 4 for i in range(len(imgs))]
    assert all(ds[i]["image"].shape == (16, 16, 3) for i in range(len(ds)))


def _digests(path: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.iterdir())}


@pytest.mark.parametrize("encode", ["jpeg", "png", "raw"])
def test_threads_and_processes_write_byte_identical_packs(tmp_path, encode):
    imgs = write_images(tmp_path / "imgs", 20, size=(36, 44), fmt="jpg")
    rows = [[name, str(i), f"{i},{i + 1}"] for i, (name, _) in enumerate(imgs)]
    write_csv(tmp_path / "l.csv", ["image", "label", "pair"], rows)
    digests = {}
    for workers, pool in [(0, "threads"), (2, "threads"), (2, "processes")]:
        dst = tmp_path / f"{workers}-{pool}"
        pack(
            tmp_path / "imgs",
            tmp_path / "l.csv",
            dst,
            dtype=["int64", "vint32"],
            height=24,
            width=32,
            encode=encode,
            shards=3,
            workers=workers,
            pool=pool,
            progress=False,
        )
        digests[(workers, pool)] = _digests(dst)
    first = digests[(0, "threads")]
    assert sorted(first) == ["manifest.json", *(f"shard-0000{k}.h5" for k in range(3))]
    assert digests[(2, "threads")] == first and digests[(2, "processes")] == first


@pytest.mark.parametrize("encode", ["jpeg", "raw"])
def test_sequences_and_skipped_rows_pack_the_same_in_worker_processes(tmp_path, encode):
    """Rows of 1-3 frames and undecodable rows skipped: worker processes spool frames in
    files of their own, and the pack must still equal the one made in this process."""
    imgs = write_images(tmp_path / "imgs", 12, size=(40, 30), fmt="jpg")
    (tmp_path / "imgs" / "broken.jpg").write_bytes(b"\xff\xd8\xff not a jpeg")
    names = [n for n, _ in imgs]
    rows = []
    for i in range(30):
        frames = [names[(i + k) % len(names)] for k in range(1 + i % 3)]
        if i % 7 == 3:
            frames.insert(1, "broken.jpg")
        rows.append([",".join(frames), str(i)])
    write_csv(tmp_path / "l.csv", ["image", "label"], rows)
    digests, reports = {}, {}
    for workers, pool in [(0, "threads"), (2, "processes")]:
        dst = tmp_path / f"{workers}-{pool}"
        reports[pool] = pack(tmp_path / "imgs", tmp_path / "l.csv", dst, dtype=["int64"],
                             height=16, width=24, encode=encode, shards=4, is_seq=True,
                             workers=workers, pool=pool, on_error="skip", progress=False)  # fmt: skip
        digests[pool] = _digests(dst)
        assert not [p for p in dst.iterdir() if p.suffix == ".spool"]
    assert [s.line for s in reports["processes"].skipped] == [5, 12, 19, 26]
    assert reports["processes"].num_samples == 26
    assert digests["processes"] == digests["threads"]
    ds = PackedDataset(tmp_path / "2-processes", verify=True)
    assert [len(ds[i]["image"]) for i in range(3)] == [1, 2, 3]


def test_jpeg_bytes_are_pillows_own(tmp_path):
    """Encoding through a file descriptor (so threads run in parallel) changes no byte."""
    img = Image.fromarray(smooth_image(np.random.default_rng(1), 48, 64))
    exif = Image.Exif()
    exif[0x010F] = "scramjet camera"
    for extra in ({}, {"exif": exif.tobytes()}):
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=87, **extra)
        assert encode_image(img, "jpeg", 87, extra.get("exif")) == buf.getvalue()


def _with_row(root: Path, name: str, source: str) -> None:
    """Put ``name`` (a copy of ``source``) at CSV line 8, in the middle of the list."""
    (root / name).write_bytes((root / source).read_bytes())
    lines = (root / "list.csv").read_text().splitlines()
    lines.insert(7, f"{name}\t3")
    (root / "list.csv").write_text("\n".join(lines) + "\n")


def _no_pack_left(tmp_path: Path) -> None:
    assert sorted(p.name for p in tmp_path.iterdir()) == ["imgs"]


@pytest.mark.parametrize("workers,pool", [(2, "threads"), (0, "threads")])
def test_a_decoder_that_raises_in_a_worker_names_the_row_and_cause(
    folder, tmp_path, monkeypatch, workers, pool
):
    root, imgs = folder
    _with_row(root, "bad.png", imgs[0][0])
    real = writer.load_image

    def load_image(path: str, *args: int) -> object:
        if path.endswith("bad.png"):
            raise RuntimeError("decoder state corrupted")
        return real(path, *args)

    monkeypatch.setattr(writer, "load_image", load_image)
    opts = {"dtype": ["int64"], "height": 8, "width": 8, "progress": False}
    with pytest.raises(
        PackError,
        match=r"cannot read image 'bad\.png' \(RuntimeError: decoder state corrupted\) "
        r"\(CSV row at line 8, file 'bad\.png'\)",
    ):
        pack(root, root / "list.csv", tmp_path / "p", workers=workers, pool=pool, **opts)
    _no_pack_left(tmp_path)
    report = pack(root, root / "list.csv", tmp_path / "p", workers=workers, on_error="skip", **opts)
    assert [(s.line, s.file) for s in report.skipped] == [(8, "bad.png")]
    assert report.skipped[0].reason.endswith("(RuntimeError: decoder state corrupted)")


@pytest.mark.parametrize("pool", ["threads", "processes"])
def test_an_exception_escaping_a_worker_names_the_row_and_cause(
    folder, tmp_path, monkeypatch, pool
):
    root, imgs = folder
    _with_row(root, "raise.png", imgs[0][0])
    monkeypatch.setattr(writer, "_encode_task", encode_or_raise)  # processes import it
    with pytest.raises(PackError) as info:
        pack(
            root,
            root / "list.csv",
            tmp_path / "p",
            dtype=["int64"],
            height=8,
            width=8,
            workers=2,
            pool=pool,
            progress=False,
        )
    assert str(info.value) == (
        "encoding the CSV row at line 8 (file 'raise.png') raised RuntimeError: decoder "
        f"state corrupted by raise.png in an encoding worker ({pool}). Nothing was "
        "written to dst."
    )
    # the worker's traceback is chained, from a thread or from a worker process
    chained = "".join(traceback.format_exception(info.value))
    assert 'in encode_or_raise\n    raise RuntimeError(f"decoder state corrupted' in chained, (
        chained
    )
    _no_pack_left(tmp_path)


def test_pool_must_be_threads_or_processes(folder, tmp_path):
    root, _ = folder
    with pytest.raises(ValueError, match=r"pool must be 'threads' or 'processes', got 'fork'"):
        pack(
            root, root / "list.csv", tmp_path / "p", dtype=["int64"], height=8, width=8, pool="fork"
        )


def test_worker_processes_are_fresh_interpreters_with_results_in_order():
    """Workers import neither torch nor the caller's script, and results keep task order."""
    import torch  # noqa: F401 - the parent has torch; the workers must not import it

    rng = random.Random(0)
    tasks = [(i, rng.choice([0.0, 0.0, 0.002, 0.01])) for i in range(200)]
    out = list(_pool.results(where_am_i, tasks, 2, "processes"))
    assert [i for i, _ in out] == list(range(200))
    pids = {pid for _, (pid, _, _, _) in out}
    assert len(pids) == 2 and os.getpid() not in pids  # both workers took tasks
    assert {ppid for _, (_, ppid, _, _) in out} == {os.getpid()}  # started by this process
    assert not any(has_torch for _, (_, _, has_torch, _) in out)
    assert {main for _, (_, _, _, main) in out} == {None}  # `python -c`: no script was run


INTERRUPT_SCRIPT = textwrap.dedent("""
    import sys
    from scramjet.data import pack

    pack(sys.argv[1], sys.argv[2], sys.argv[3], dtype=["int64"], height=64, width=64,
         encode="png", workers=2, pool="processes", progress=False)
""")


def _session(sid: int) -> list[int]:
    """Live processes of session ``sid`` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split() if stat else []
        if fields and int(fields[3]) == sid and fields[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table")
def test_ctrl_c_stops_pack_and_its_workers_quietly(tmp_path):
    """SIGINT to the terminal's process group (Ctrl-C): pack raises KeyboardInterrupt,
    the workers print nothing and are gone, and nothing is left at dst."""
    write_images(tmp_path / "imgs", 1, size=(600, 600))
    # ~15 s of work on two cores, so that pack is still encoding when the signal comes
    write_csv(tmp_path / "l.csv", ["image", "label"], [["img_0.png", str(i)] for i in range(4000)])
    args = [tmp_path / "imgs", tmp_path / "l.csv", tmp_path / "p"]
    proc = start_in_session(INTERRUPT_SCRIPT, *args)
    try:
        deadline = time.monotonic() + 60
        while not any(p.name.startswith(".p.partial-") for p in tmp_path.iterdir()):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        while len(_session(proc.pid)) < 3:  # pack and its two worker processes
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(1.0)  # the workers are encoding
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        time.sleep(0.5)
        left = _session(proc.pid)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode != 0 and err.count("Traceback") == 1, err
    assert err.rstrip().endswith("KeyboardInterrupt"), err
    assert not left, f"processes left: {left}"
    assert not (tmp_path / "p").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".p.partial-")]


def test_workers_that_cannot_start_raise_a_clear_error(folder, tmp_path, monkeypatch):
    """No interpreter to start (an embedded or frozen Python): a PackError that says so
    and points at threads, and nothing at dst."""
    root, _ = folder
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python-here"))
    with pytest.raises(PackError) as info:
        pack(root, root / "list.csv", tmp_path / "p", dtype=["int64"], height=8, width=8,
             workers=2, pool="processes", progress=False)  # fmt: skip
    msg = str(info.value)
    assert "an encoding worker process died or could not start (a worker could not start: " in msg
    assert "no-python-here" in msg and "FileNotFoundError" in msg
    assert "no CSV row was in flight; pool='threads' needs no worker processes" in msg
    _no_pack_left(tmp_path)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the setting is glibc's")
def test_worker_processes_reuse_freed_image_memory_unless_the_user_says_otherwise(monkeypatch):
    """A fresh worker's small heap used to be trimmed after every freed image, so each
    224 x 224 image was faulted in again (about 76 faults per image here); the workers
    now keep 16 MiB at the top of the heap. A MALLOC_TOP_PAD_ of the user's own wins."""
    tasks = [(0, 200), (1, 200)]
    padded = list(_pool.results(heap_faults, tasks, 2, "processes"))
    assert [i for i, _ in padded] == [0, 1]
    assert all(faults < 5 for _, faults in padded), padded
    monkeypatch.setenv("MALLOC_TOP_PAD_", "0")
    unpadded = list(_pool.results(heap_faults, tasks, 2, "processes"))
    assert all(faults > 20 for _, faults in unpadded), unpadded


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/self/status")
def test_worker_processes_start_no_blas_threads_unless_the_user_says_otherwise(monkeypatch):
    """Importing numpy started an OpenBLAS thread per core in every worker process, which
    slowed their start on many cores; they only encode, so they get one thread each: the
    main thread and the one that reads the pack process's socket. A user's value wins."""
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    out = list(_pool.results(blas_threads, [(0,), (1,)], 2, "processes"))
    assert [value for _, value in out] == [(2, "1"), (2, "1")]
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    out = list(_pool.results(blas_threads, [(0,), (1,)], 2, "processes"))
    assert [env for _, (_, env) in out] == ["3", "3"]


def test_no_more_worker_processes_start_than_there_are_chunks():
    out = list(_pool.results(where_am_i, [(i, 0.0) for i in range(3)], 8, "processes"))
    assert [i for i, _ in out] == [0, 1, 2]
    assert len({pid for _, (pid, _, _, _) in out}) == 3  # one row per chunk, one chunk each


def test_a_worker_that_dies_is_blamed_for_the_task_it_was_on_not_the_last_read():
    """Chunks of 4 alternate between workers A and B. A answers tasks 0-3, then 8 and 9,
    and is killed on 10 while the reader is still busy with task 3 (B is slow, so the next
    chunk goes to A). Sending it finds A's socket closed: the answers A sent before it
    died are read first, so the error names task 10, and 8 and 9 are not lost."""
    tasks = [(i, 10, 0.3 if 4 <= i < 8 else 0.0) for i in range(64)]
    out = []
    with pytest.raises(_pool.WorkerDied) as info:
        for value in _pool.results(die_on, tasks, 2, "processes"):
            out.append(value)
            if value == 3:  # the end of chunk 0: A meanwhile reaches task 10 and dies
                time.sleep(1.0)
    assert out == [0, 1, 2, 3]
    (how, on), *others = info.value.ends
    assert "SIGKILL" in how and on == 10 and not others
    assert 10 in info.value.indices and not {8, 9} & set(info.value.indices)
