"""A user's own folders and CSV lists packed and read back: what must not be lost or deleted."""

from __future__ import annotations

import numpy as np
import pytest
from packdata_helpers import photo_folder, small_pack
from PIL import Image

from scramjet.data import PackedDataset, PackError

_pack, _photos = small_pack, photo_folder


# ----- 16-bit and other wide images are scaled to 8 bits, never clipped to white ----------
def test_16bit_grayscale_png_is_scaled_to_8_bits_not_clipped(tmp_path):
    root = tmp_path / "scans"
    root.mkdir()
    wide = (np.arange(48, dtype=np.uint16).reshape(6, 8) * 1365).astype(np.uint16)
    Image.fromarray(wide).save(root / "depth.png")  # opens as mode I;16
    assert Image.open(root / "depth.png").mode == "I;16"
    (root / "list.csv").write_text("image,label\ndepth.png,0\n")
    for channel in (1, 3):
        _pack(root, root / "list.csv", tmp_path / f"p{channel}", encode="raw", channel=channel)
        got = PackedDataset(tmp_path / f"p{channel}")[0]["image"]
        expected = (wide.astype(np.uint32) >> 8).astype(np.uint8)  # as Pillow reads 16-bit RGB
        assert (got == expected[:, :, None]).all(), got[:, :, 0]


def test_float_image_with_values_outside_0_255_is_a_bad_row(tmp_path):
    root = tmp_path / "maps"
    root.mkdir()
    Image.fromarray(np.linspace(0, 1000, 48, dtype=np.float32).reshape(6, 8)).save(root / "f.tif")
    Image.fromarray(np.full((6, 8, 3), 9, np.uint8)).save(root / "ok.png")
    (root / "list.csv").write_text("image,label\nf.tif,0\nok.png,1\n")
    with pytest.raises(PackError, match=r"'f.tif'.*mode 'F'.*0\.0 to 1000\.0.*8-bit"):
        _pack(root, root / "list.csv", tmp_path / "p", encode="raw")
    report = _pack(root, root / "list.csv", tmp_path / "p", encode="raw", on_error="skip")
    assert [s.file for s in report.skipped] == ["f.tif"] and report.num_samples == 1


# ----- overwrite replaces packs, never the user's own folders ------------------------------
def test_overwrite_never_deletes_the_source_folder_or_list(tmp_path):
    root = _photos(tmp_path)
    before = sorted(p.name for p in root.iterdir())
    for dst in (root, tmp_path, root / "list.csv"):
        with pytest.raises(FileExistsError, match="file_dir or file_list"):
            _pack(root, root / "list.csv", dst, overwrite=True)
    assert sorted(p.name for p in root.iterdir()) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_overwrite_refuses_a_folder_that_is_not_a_pack(tmp_path):
    root = _photos(tmp_path)
    notes = tmp_path / "results"
    notes.mkdir()
    (notes / "notes.txt").write_text("a week of work")
    with pytest.raises(FileExistsError, match=r"not a pack.*notes\.txt"):
        _pack(root, root / "list.csv", notes, overwrite=True)
    assert (notes / "notes.txt").read_text() == "a week of work"
    _pack(root, root / "list.csv", tmp_path / "p")
    _pack(root, root / "list.csv", tmp_path / "p", overwrite=True, shards=3)  # a pack: fine
    assert len(PackedDataset(tmp_path / "p").manifest.shards) == 3


def test_cli_overwrite_refusal_prints_the_reason(tmp_path, capsys):
    from scramjet.cli import main

    root = _photos(tmp_path)
    argv = ["pack", str(root), str(root / "list.csv"), str(root), "--dtype", "int64"]
    assert main([*argv, "--height", "6", "--width", "8", "--overwrite", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "file_dir or file_list" in err and "overwrite=True" not in err
    assert (root / "list.csv").is_file()


# ----- messages for rows that hold no value ------------------------------------------------
def test_empty_value_cell_says_it_is_empty(tmp_path):
    root = _photos(tmp_path)
    (root / "list.csv").write_text("image,label,score\n0.png,0,0.5\n1.png,1,\n2.png,2, \n")
    report = _pack(root, root / "list.csv", tmp_path / "p", dtype=["int64", "float32"],
                   on_error="skip")  # fmt: skip
    reasons = [s.reason for s in report.skipped]
    assert len(reasons) == 2
    for reason in reasons:
        assert "empty" in reason and "'score'" in reason and "nan" in reason
        assert "for lists" not in reason


def test_every_row_skipped_names_the_reasons(tmp_path):
    root = _photos(tmp_path)
    (root / "list.csv").write_text("image,label\n0.png,1.5\nmissing.png,1\n")
    with pytest.raises(PackError, match=r"all 2 rows.*line 2.*'1\.5' is not an integer.*line 3"):
        _pack(root, root / "list.csv", tmp_path / "p", on_error="skip")


# ----- reading back: settings that would be ignored or fail late are refused early -------
def test_transform_for_a_column_the_dataset_does_not_read_is_refused(tmp_path):
    root = _photos(tmp_path)
    _pack(root, root / "list.csv", tmp_path / "p")
    with pytest.raises(ValueError, match=r"transform.*\['lable'\].*\['image', 'label'\]"):
        PackedDataset(tmp_path / "p", transform={"lable": abs})
    with pytest.raises(ValueError, match=r"transform.*\['image'\].*\['label'\].*columns="):
        PackedDataset(tmp_path / "p", columns="label", transform={"image": abs})
    with pytest.raises(TypeError, match=r"transform.*'label'.*str"):
        PackedDataset(tmp_path / "p", transform={"label": "abs"})
    with pytest.raises(TypeError, match=r"transform must be a callable.*int"):
        PackedDataset(tmp_path / "p", transform=3)
    assert PackedDataset(tmp_path / "p", transform={"label": abs})[0]["label"] == 0


@pytest.mark.parametrize("backend", ["threads", "processes"])
def test_loader_refuses_shuffle_with_a_sampler(tmp_path, backend):
    root = _photos(tmp_path)
    _pack(root, root / "list.csv", tmp_path / "p")
    ds = PackedDataset(tmp_path / "p", columns="label")
    with pytest.raises(ValueError, match=r"shuffle=True.*sampler.*ignored"):
        ds.loader(2, shuffle=True, sampler=[2, 1, 0], backend=backend)
    batches = [b["label"].tolist() for b in ds.loader(2, sampler=[2, 1, 0], backend=backend)]
    assert batches == [[2, 1], [0]]


# ----- the Trainer with a sampler of the user's in train_dataloader_kwargs ----------------
class _StopAtStep(Exception):
    pass


def test_resume_with_a_weighted_sampler_in_dataloader_kwargs_is_exact(tmp_path):
    import torch
    from torch import nn
    from torch.utils.data import TensorDataset, WeightedRandomSampler

    from scramjet import Trainer
    from scramjet.callbacks import SaveTrainingStateCallback, TrainerCallback

    x = torch.randn(24, 4, generator=torch.Generator().manual_seed(0))
    data = TensorDataset(x, (x.sum(1) > 0).long())

    class Stop(TrainerCallback):
        def on_optimizer_step_end(self, trainer, **kwargs):
            if trainer.state.global_step == 5:
                raise _StopAtStep

    def run(folder, stop=False, resume=None):
        torch.manual_seed(0)
        model = nn.Linear(4, 2)
        callbacks = [SaveTrainingStateCallback(folder, every_n_steps=1)] + [Stop()] * stop
        trainer = Trainer(model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), 0.1),
                          callbacks=callbacks, seed=3)  # fmt: skip
        sampler = WeightedRandomSampler(torch.linspace(0.1, 1, 24), 20)
        try:
            trainer.train(data, num_epochs=2, per_device_batch_size=4, resume_from=resume,
                          train_dataloader_kwargs={"sampler": sampler})  # fmt: skip
        except Exception as exc:  # the callback's stop arrives wrapped, naming the callback
            assert stop and isinstance(exc.__cause__ or exc, _StopAtStep | RuntimeError)
        return model.weight.detach().clone()

    whole = run(tmp_path / "a")
    run(tmp_path / "b", stop=True)
    assert torch.equal(run(tmp_path / "b", resume=tmp_path / "b"), whole)


# ----- Ctrl-C on the command line --------------------------------------------------------
_SLOW_CLI = """
import sys, time
import scramjet.data.writer as w
real = w._encode_task
def slow(task):
    print("encoding", flush=True)
    time.sleep(0.2)
    return real(task)
w._encode_task = slow
from scramjet.cli import main
sys.exit(main(["pack", *sys.argv[1:], "--dtype", "int64", "--height", "6", "--width", "8",
               "--workers", "1", "--no-progress"]))
"""


def test_cli_ctrl_c_ends_with_one_line_and_status_130(tmp_path):
    import signal
    import subprocess
    import sys

    root = _photos(tmp_path, n=20)
    args = [str(root), str(root / "list.csv"), str(tmp_path / "p")]
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_CLI, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,  # SIGINT as in a terminal:
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "encoding\n"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err and "nothing was written" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["photos"]
