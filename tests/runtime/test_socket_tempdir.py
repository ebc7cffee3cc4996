"""DataLoader workers deliver their batches under a long ``TMPDIR``.

A worker hands a batch's tensors to the training process through a socket file in
multiprocessing's temp folder. Python before 3.13 binds it under ``$TMPDIR`` whatever its
length: past about 75 characters the worker prints ``AF_UNIX path too long`` and the
training process waits forever. The Trainer, the pack's process loader and the nebulae
tank now give multiprocessing a short folder first (Python 3.13 does this itself)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TRAINER_RUN = """
import multiprocessing.util as mu
import torch
from torch import nn
from torch.utils.data import TensorDataset
from scramjet import Trainer

ds = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
model = nn.Linear(4, 2)
trainer = Trainer(model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1),
                  callbacks=[])
trainer.train(ds, num_epochs=2, per_device_batch_size=8,
              train_dataloader_kwargs={"num_workers": 2})
print("trained", trainer.state.global_step, mu.get_temp_dir())
"""

PACK_READ = """
import multiprocessing.util as mu
import sys
from pathlib import Path
from PIL import Image
from scramjet.data import PackedDataset, pack

root = Path(sys.argv[1])
root.mkdir()
for i in range(16):
    Image.new("RGB", (4, 4), (i * 10, 0, 0)).save(root / f"{i}.png")
(root / "list.csv").write_text("image,label\\n" + "".join(f"{i}.png,{i % 3}\\n" for i in range(16)))
pack(root, root / "list.csv", root.parent / "small.pack", height=4, width=4, shards=2,
     dtype=["int64"], workers=0, progress=False)
ds = PackedDataset(root.parent / "small.pack")
seen = 0
for batch in ds.loader(batch_size=4, num_workers=2, backend="processes"):
    seen += len(batch["label"])
print("read", seen, mu.get_temp_dir())
"""


def long_tmpdir(tmp_path: Path) -> Path:
    """A temp folder whose path is over 90 characters: too long for a socket inside it."""
    folder = tmp_path / ("t" * max(10, 95 - len(str(tmp_path))))
    folder.mkdir()
    assert len(str(folder)) > 90
    return folder


def run(code: str, tmpdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env, capture_output=True, text=True, timeout=150,
    )  # fmt: skip


def check_short_folder(out: str, tmpdir: Path) -> None:
    folder = out.split()[-1]
    if sys.version_info < (3, 13):
        assert len(folder) + 32 <= 107, folder
    # multiprocessing removes its folder when the process exits, and nothing is left behind
    assert not Path(folder).exists(), folder
    assert not [p.name for p in tmpdir.iterdir() if p.name.startswith("pymp-")]


def test_trainer_workers_deliver_under_a_long_tmpdir(tmp_path: Path) -> None:
    tmpdir = long_tmpdir(tmp_path)
    try:
        done = run(TRAINER_RUN, tmpdir)
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"DataLoader workers never delivered a batch under a long TMPDIR: {hung}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "AF_UNIX path too long" not in done.stderr
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith("trained 16 "), line
    check_short_folder(line, tmpdir)


def test_pack_process_loader_delivers_under_a_long_tmpdir(tmp_path: Path) -> None:
    tmpdir = long_tmpdir(tmp_path)
    try:
        done = run(PACK_READ, tmpdir, str(tmp_path / "images"))
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"the pack's worker processes never delivered a batch: {hung}")
    assert done.returncode == 0, done.stderr[-3000:]
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith("read 16 "), line
    check_short_folder(line, tmpdir)


def test_a_short_tmpdir_is_left_alone(tmp_path: Path) -> None:
    code = """
    from scramjet.runtime.processes import fit_socket_tempdir
    print("chose", fit_socket_tempdir())
    """
    done = run(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["chose", "None"]
    assert not list(tmp_path.iterdir())  # no pymp folder made when none was needed


@pytest.mark.skipif(sys.version_info >= (3, 13), reason="Python 3.13 shortens the folder itself")
def test_warns_with_the_fix_when_no_short_folder_is_writable(tmp_path: Path) -> None:
    code = """
    import warnings
    from scramjet.runtime import processes
    processes._SHORT_FOLDERS = ()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert processes.fit_socket_tempdir() is None
        assert processes.fit_socket_tempdir() is None
    print(len(caught))
    print(caught[0].message)
    """
    done = run(code, long_tmpdir(tmp_path))
    assert done.returncode == 0, done.stderr
    count, message = done.stdout.split("\n", 1)
    assert count == "1"  # once, not at every loader
    assert "too long for worker processes' sockets" in message
    assert "Set TMPDIR to a shorter folder" in message
