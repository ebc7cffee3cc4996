"""Bad rows, unsafe paths, corruption and interrupted packs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest
from packdata_helpers import start_in_session, write_csv, write_images

from scramjet.data import PackedDataset, PackError, pack
from scramjet.data.format import PackFormatError


def _pack(root, csv, dst, **kw):
    opts = {"dtype": ["int64"], "height": 8, "width": 8, "workers": 0, "progress": False}
    opts.update(kw)
    return pack(root, csv, dst, **opts)


def _no_pack_left(tmp_path, name="p"):
    assert not (tmp_path / name).exists()
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(f".{name}.")]
    assert leftovers == []
    with pytest.raises(PackFormatError, match=r"manifest\.json is missing"):
        PackedDataset(tmp_path / name)


def test_missing_file_names_row_and_file(folder, tmp_path):
    root, _ = folder
    with open(root / "list.csv", "a") as fh:
        fh.write("nope.png\t1\n")
    with pytest.raises(PackError, match=r"file not found.*line 14.*'nope.png'"):
        _pack(root, root / "list.csv", tmp_path / "p")
    _no_pack_left(tmp_path)


def test_a_list_without_a_header_line_is_refused_instead_of_losing_its_first_row(folder, tmp_path):
    root, _ = folder
    rows = (root / "list.csv").read_text().splitlines()[1:]  # the header left out
    (root / "bare.csv").write_text("\n".join(rows) + "\n")
    # the list is tab-separated: so is the header the advice shows
    with pytest.raises(ValueError, match=r"looks like a row, not a header.*e\.g\. 'image\\tlabel'"):
        _pack(root, root / "bare.csv", tmp_path / "p")
    _no_pack_left(tmp_path)


def test_a_row_with_a_missing_cell_or_a_folder_says_so(folder, tmp_path):
    root, imgs = folder
    (root / "sub").mkdir()
    first = imgs[0][0]
    for row, reason in [
        (first, r"1 cells but the header has 2 \(no cell for \['label'\]\)"),
        (f"{first}\t1\t2", "3 cells but the header has 2"),
        ("sub\t1", "the path is a directory under file_dir"),
    ]:
        (root / "short.csv").write_text(f"image\tlabel\n{row}\n")
        with pytest.raises(PackError, match=rf"{reason}.*line 2"):
            _pack(root, root / "short.csv", tmp_path / "p")
        _no_pack_left(tmp_path)


@pytest.mark.parametrize("workers", [-1, 1.5, "2", True])
def test_a_bad_number_of_workers_is_refused(folder, tmp_path, workers):
    root, _ = folder
    with pytest.raises(ValueError, match=rf"workers must be None .*received {workers!r}"):
        _pack(root, root / "list.csv", tmp_path / "p", workers=workers)
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("workers,pool", [(0, "threads"), (2, "threads"), (2, "processes")])
def test_undecodable_image_stops_midway_and_leaves_nothing(folder, tmp_path, workers, pool):
    root, _ = folder
    (root / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 50)
    lines = (root / "list.csv").read_text().splitlines()
    lines.insert(7, "broken.png\t3")  # in the middle: earlier rows are already spooled
    (root / "list.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(PackError, match=r"cannot read image 'broken.png'.*line 8"):
        _pack(root, root / "list.csv", tmp_path / "p", workers=workers, pool=pool)
    _no_pack_left(tmp_path)


@pytest.mark.parametrize(
    "value,msg",
    [
        ("abc", "not an integer"),
        ("3.5", "not an integer"),
        ("1_000", "holds an underscore"),
        ("1,2", "use the dtype 'vint64'"),
        ("", "expected one"),
    ],
)
def test_wrong_value_type_names_row(folder, tmp_path, value, msg):
    root, imgs = folder
    write_csv(root / "bad.csv", ["image", "label"], [[imgs[0][0], "1"], [imgs[1][0], value]])
    with pytest.raises(PackError, match=rf"column 'label'.*{msg}.*line 3.*'img_1.png'"):
        _pack(root, root / "bad.csv", tmp_path / "p")


def test_a_float_with_an_underscore_is_rejected(folder, tmp_path):
    root, imgs = folder
    write_csv(root / "bad.csv", ["image", "label"], [[imgs[0][0], "1_0.5"]])
    with pytest.raises(PackError, match=r"'1_0.5' holds an underscore.*line 2"):
        _pack(root, root / "bad.csv", tmp_path / "p", dtype=["float32"])


def test_out_of_range_value_rejected(folder, tmp_path):
    root, imgs = folder
    write_csv(root / "bad.csv", ["image", "label"], [[imgs[0][0], "300"]])
    with pytest.raises(PackError, match="outside the range of uint8"):
        _pack(root, root / "bad.csv", tmp_path / "p", dtype=["uint8"])


@pytest.mark.parametrize("name", ["../outside.png", "sub/../../outside.png", "/etc/passwd"])
def test_path_traversal_rejected(tmp_path, name):
    write_images(tmp_path / "root", 1, size=(8, 8))
    write_images(tmp_path, 1, size=(8, 8), prefix="outside")
    (tmp_path / "outside.png").write_bytes((tmp_path / "outside_0.png").read_bytes())
    write_csv(tmp_path / "l.csv", ["image", "label"], [["img_0.png", "0"], [name, "1"]])
    with pytest.raises(PackError, match=r"escapes file_dir|absolute paths are not allowed"):
        _pack(tmp_path / "root", tmp_path / "l.csv", tmp_path / "p")
    report = _pack(tmp_path / "root", tmp_path / "l.csv", tmp_path / "p", on_error="skip")
    assert report.num_samples == 1 and [s.line for s in report.skipped] == [3]


def test_skip_reports_rows_and_keeps_shard_count(folder, tmp_path):
    root, _ = folder
    (root / "broken.png").write_bytes(b"not an image")
    with open(root / "list.csv", "a") as fh:
        fh.write("broken.png\t1\nmissing.png\t2\nimg_0.png\tx\n")
    report = _pack(root, root / "list.csv", tmp_path / "p", on_error="skip", shards=4, workers=2)
    assert report.num_samples == 12 and report.shard_sizes == [3, 3, 3, 3]
    assert sorted((s.line, s.file) for s in report.skipped) == [
        (14, "broken.png"),
        (15, "missing.png"),
        (16, "img_0.png"),
    ]
    ds = PackedDataset(tmp_path / "p")
    assert len(ds) == 12 and len(ds.manifest.extra["skipped_rows"]) == 3


def test_verify_detects_a_corrupted_shard(folder, tmp_path):
    root, _ = folder
    _pack(root, root / "list.csv", tmp_path / "p", shards=2, encode="raw")
    PackedDataset(tmp_path / "p", verify=True)
    shard = tmp_path / "p" / "shard-00001.h5"
    data = bytearray(shard.read_bytes())
    data[-100] ^= 0xFF  # flip one byte inside the pixel data, same size
    shard.write_bytes(bytes(data))
    PackedDataset(tmp_path / "p")  # cheap checks (sizes) pass
    with pytest.raises(PackFormatError, match=r"shard-00001\.h5.*SHA-256"):
        PackedDataset(tmp_path / "p", verify=True)
    shard.write_bytes(bytes(data[:-10]))
    with pytest.raises(PackFormatError, match="truncated"):
        PackedDataset(tmp_path / "p")


def test_existing_destination_needs_overwrite(folder, tmp_path):
    root, _ = folder
    _pack(root, root / "list.csv", tmp_path / "p")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        _pack(root, root / "list.csv", tmp_path / "p")
    report = _pack(root, root / "list.csv", tmp_path / "p", overwrite=True, shards=3)
    assert len(PackedDataset(tmp_path / "p").manifest.shards) == 3 == len(report.shard_sizes)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


KILL_SCRIPT = textwrap.dedent("""
    import sys, time
    import scramjet.data.writer as w
    real = w.file_sha256
    def slow(path):
        digest = real(path)
        open(sys.argv[3] + ".ready", "w").close()  # first shard is fully written
        time.sleep(60)
        return digest
    w.file_sha256 = slow
    w.pack(sys.argv[1], sys.argv[2], sys.argv[3], dtype=["int64"], height=8, width=8,
           shards=3, workers=0, progress=False)
""")


def test_killed_pack_leaves_no_valid_output(folder, tmp_path):
    root, _ = folder
    dst = tmp_path / "p"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(root), str(root / "list.csv"), str(dst)]
    )
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(f"{dst}.ready"):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not dst.exists()
    partial = [p for p in tmp_path.iterdir() if p.name.startswith(".p.partial-")]
    assert len(partial) == 1 and (partial[0] / "shard-00000.h5").exists()
    assert not (partial[0] / "manifest.json").exists()
    with pytest.raises(PackFormatError):
        PackedDataset(dst)
    with pytest.raises(PackFormatError):
        PackedDataset(partial[0])


# ----- a dead encoding worker ends the pack with an error instead of a hang ----------------
def _run_script(script, *args, timeout=120):
    """Run a pack script in its own session; kill the whole session if it hangs."""
    proc = start_in_session(script, *args, stdout=subprocess.PIPE)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"pack still running after {timeout} s: a dead worker made it hang")
    return proc.returncode, err


DIE_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[4])
    import packdata_helpers
    import scramjet.data.writer as w
    w._encode_task = packdata_helpers.encode_or_die  # SIGKILLs the worker on die.png
    w.pack(sys.argv[1], sys.argv[2], sys.argv[3], dtype=["int64"], height=8, width=8,
           workers=2, pool="processes", progress=False)
""")


def test_worker_killed_on_a_row_raises_naming_it_and_leaves_nothing(folder, tmp_path):
    root, imgs = folder
    (root / "die.png").write_bytes((root / imgs[0][0]).read_bytes())
    lines = (root / "list.csv").read_text().splitlines()
    lines.insert(7, "die.png\t3")  # CSV line 8, in the middle of the list
    (root / "list.csv").write_text("\n".join(lines) + "\n")
    helpers = os.path.dirname(os.path.abspath(__file__))
    code, err = _run_script(DIE_SCRIPT, root, root / "list.csv", tmp_path / "p", helpers)
    assert code == 1, err
    assert "PackError: an encoding worker process died" in err
    assert "line 8 'die.png'" in err and "out of memory" in err and "workers=1" in err
    assert (
        "a worker was killed by SIGKILL, as the out-of-memory killer does, while it encoded "
        "CSV line 8 'die.png'" in err
    )
    _no_pack_left(tmp_path)


EXTERNAL_KILL_SCRIPT = textwrap.dedent("""
    import sys
    from scramjet.data import pack
    pack(sys.argv[1], sys.argv[2], sys.argv[3], dtype=["int64"], height=64, width=64,
         encode="png", workers=2, pool="processes", progress=False)
""")


def _children(pid):
    found = []
    for stat in os.scandir("/proc"):
        if not stat.name.isdigit():
            continue
        try:
            with open(f"/proc/{stat.name}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.name))
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds the workers through /proc")
def test_worker_killed_from_outside_mid_pack_raises(tmp_path):
    """Like the OOM killer: SIGKILL one encoding worker while the pack is running."""
    write_images(tmp_path / "imgs", 1, size=(400, 400))
    write_csv(tmp_path / "l.csv", ["image", "label"], [["img_0.png", str(i)] for i in range(300)])
    args = [tmp_path / "imgs", tmp_path / "l.csv", tmp_path / "p"]
    proc = start_in_session(EXTERNAL_KILL_SCRIPT, *args)
    try:
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while not workers:  # the workers are children of proc
            assert proc.poll() is None and time.monotonic() < deadline
            workers = _children(proc.pid)
            time.sleep(0.01)
        os.kill(workers[0], signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            pytest.fail("pack still running 60 s after a worker was killed: it hangs")
    assert proc.returncode == 1, err
    assert "PackError: an encoding worker process died" in err and "CSV rows were in flight" in err
    assert "killed by SIGKILL" in err
    _no_pack_left(tmp_path)


NO_START_SCRIPT = textwrap.dedent("""
    import importlib, os, sys
    # a task function whose module the worker processes cannot import: every worker dies
    # as it takes its first task, as when workers cannot start at all
    sys.path.insert(0, sys.argv[4])
    import vanishing
    sys.path.pop(0)
    os.remove(vanishing.__file__)
    importlib.invalidate_caches()
    import scramjet.data.writer as w
    w._encode_task = vanishing.task
    w.pack(sys.argv[1], sys.argv[2], sys.argv[3], dtype=["int64"], height=8, width=8,
           workers=2, pool="processes", progress=False)
""")


def test_workers_that_cannot_run_raise_instead_of_restarting_forever(folder, tmp_path):
    root, _ = folder
    (tmp_path / "mod").mkdir()
    (tmp_path / "mod" / "vanishing.py").write_text("def task(t):\n    return t[0], []\n")
    code, err = _run_script(
        NO_START_SCRIPT, root, root / "list.csv", tmp_path / "p", tmp_path / "mod"
    )
    assert code == 1, err
    assert "PackError: an encoding worker process died or could not start" in err
    assert "line 2 'img_0.png'" in err  # the first rows were in flight
    assert "a worker exited with code 1 (a Python error in the worker" in err
    assert "No module named 'vanishing'" in err  # the worker's own traceback, on stderr
    _no_pack_left(tmp_path)


# ----- float values must fit their dtype ---------------------------------------------------
def test_float_overflow_names_row_column_value_and_dtype(folder, tmp_path):
    root, imgs = folder
    rows = [["65504"], ["1e6"], ["inf"], ["-inf"], ["nan"], ["0.1"], ["1e-9"]]
    write_csv(root / "f.csv", ["image", "x"], [[imgs[i][0], *r] for i, r in enumerate(rows)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy overflow warning on the way either
        with pytest.raises(
            PackError,
            match=r"column 'x': '1e6' is outside the range of float16 \[-65504, 65504\].*"
            r"'float32' or 'float64'.*line 3, file 'img_1.png'",
        ):
            _pack(root, root / "f.csv", tmp_path / "p", dtype=["float16"])
        _no_pack_left(tmp_path)
        report = _pack(root, root / "f.csv", tmp_path / "p", dtype=["float16"], on_error="skip")
    assert [(s.line, s.file) for s in report.skipped] == [(3, "img_1.png")]
    assert "outside the range of float16" in report.skipped[0].reason
    values = [PackedDataset(tmp_path / "p")[i]["x"] for i in range(6)]
    assert values[:2] == [65504, np.inf] and values[2] == -np.inf and np.isnan(values[3])
    assert values[4] == np.float16(0.1) and values[5] == 0  # precision loss is fine
    write_csv(root / "v.csv", ["image", "x"], [[imgs[0][0], "1,2"], [imgs[1][0], "1 1e39"]])
    with pytest.raises(PackError, match=r"'1e39' is outside the range of float32.*line 3"):
        _pack(root, root / "v.csv", tmp_path / "q", dtype=["vfloat32"])
    write_csv(root / "d.csv", ["image", "x"], [[imgs[0][0], "1e400"]])
    with pytest.raises(PackError, match=r"'1e400' is outside the range of float64"):
        _pack(root, root / "d.csv", tmp_path / "q", dtype=["float64"])


# ----- overwrite replaces a file, a directory or a link and leaves nothing hidden ---------
@pytest.mark.parametrize("old", ["file", "dir", "link"])
def test_overwrite_leaves_no_hidden_copy_of_the_old_destination(folder, tmp_path, old):
    root, _ = folder
    dst = tmp_path / "out" / "train.hdf5"  # e.g. what nebulae's FuelGenerator wrote
    dst.parent.mkdir()
    target = tmp_path / "elsewhere"
    if old == "file":
        dst.write_bytes(b"\x89HDF\r\n\x1a\n an old nebulae file")
    elif old == "dir":
        dst.mkdir()
        (dst / "shard-00000.h5").write_bytes(b"old")
    else:
        target.mkdir()
        (target / "keep.txt").write_text("not ours")
        dst.symlink_to(target, target_is_directory=True)
    _pack(root, root / "list.csv", dst, overwrite=True)
    assert len(PackedDataset(dst)) == 12 and not dst.is_symlink()
    assert sorted(p.name for p in dst.parent.iterdir()) == ["train.hdf5"]
    if old == "link":  # the link is replaced, never what it points to
        assert (target / "keep.txt").read_text() == "not ours"


# ----- where a CSV path may lead ------------------------------------------------------------
@pytest.fixture
def linked_root(tmp_path):
    """A file_dir with files, a folder and symbolic links leading in, out and in circles."""
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "a.png").write_bytes(b"x")
    (root / "sub" / "b.png").write_bytes(b"x")
    (tmp_path / "outside.png").write_bytes(b"x")
    (root / "out_link.png").symlink_to(tmp_path / "outside.png")
    (root / "in_link.png").symlink_to("sub/b.png")
    (root / "dir_link").symlink_to(root / "sub")
    (root / "loop_a").symlink_to("loop_b")
    (root / "loop_b").symlink_to("loop_a")
    return root.resolve()


PATH_CASES = [
    ("a.png", "a.png"),
    ("sub//./b.png", "sub/b.png"),
    ("sub/../a.png", "a.png"),
    ("in_link.png", "sub/b.png"),  # a link inside file_dir is followed
    ("dir_link/b.png", "sub/b.png"),
    ("../root/a.png", "a.png"),  # leaves and comes back: still inside
    ("../outside.png", "escapes file_dir"),
    ("sub/../../outside.png", "escapes file_dir"),
    ("out_link.png", "escapes file_dir"),  # a link that leads out
    ("..", "escapes file_dir"),
    (".", "is a directory"),  # file_dir itself
    ("sub", "is a directory"),  # a folder
    ("dir_link", "is a directory"),  # a link to a folder
    ("missing.png", "file not found"),
    ("a.png/x", "file not found"),  # a file used as a folder
    ("loop_a", "symbolic link loop"),
    ("x" * 300 + ".png", "file name too long"),
    ("../root", "is a directory"),  # file_dir itself, by way of its parent
    ("missing_dir/a.png", "file not found"),
    ("loop_a/x.png", "symbolic link loop"),
    ("dir_link/../a.png", "a.png"),  # '..' after a link: the parent of the link's target
]


@pytest.mark.parametrize("cached", [False, True], ids=["each-name-alone", "folders-cached"])
@pytest.mark.parametrize("name,expected", PATH_CASES)
def test_csv_paths_resolve_inside_file_dir_or_name_the_reason(linked_root, name, expected, cached):
    from scramjet.data.csvlist import RowError, safe_path

    try:
        got = safe_path(linked_root, name, 7, {} if cached else None)
    except RowError as exc:
        assert exc.line == 7 and exc.file == name
        assert expected in exc.reason, exc.reason
    else:
        assert got == str(linked_root / expected)


def test_one_folder_cache_for_a_whole_list_gives_every_name_its_own_answer(linked_root):
    """pack shares one cache of resolved folders over all rows: in any order, each name
    gets the answer it gets alone."""
    from scramjet.data.csvlist import RowError, safe_path

    def answer(name, dirs):
        try:
            return safe_path(linked_root, name, 1, dirs)
        except RowError as exc:
            return exc.reason

    names = [name for name, _ in PATH_CASES] * 2
    alone = {name: answer(name, None) for name in names}
    for order in (names, names[::-1]):
        dirs: dict[str, str] = {}
        assert {name: answer(name, dirs) for name in order} == alone
        assert dirs  # the cache was used


def test_a_shard_that_cannot_be_hashed_fails_the_pack_and_leaves_nothing(
    folder, tmp_path, monkeypatch
):
    """Shards are flushed and hashed on a thread while the next one is written: an error
    there still ends the pack, after the other shards, with nothing left behind."""
    import scramjet.data.writer as writer

    root, _ = folder
    real = writer.file_sha256

    def flaky(path):
        if str(path).endswith("shard-00001.h5"):
            raise OSError("I/O error while reading shard-00001.h5")
        return real(path)

    monkeypatch.setattr(writer, "file_sha256", flaky)
    with pytest.raises(OSError, match=r"I/O error while reading shard-00001\.h5"):
        pack(root, root / "list.csv", tmp_path / "p", dtype=["int64"], height=8, width=8,
             shards=3, workers=0, progress=False)  # fmt: skip
    _no_pack_left(tmp_path)
