"""``pack`` refuses a frame size no image could take before it starts (a typo such as
99999 x 99999 asked for 28 GiB per image and was killed by the kernel), names an encoding
failure as such; ``scramjet runs`` offers only the metrics it can show, and reads a
``run.json`` holding ``{}`` as a run of unknown status; one NaN learning rate is one value."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from scramjet.cli import main
from scramjet.data import PackError, pack
from scramjet.tracking import Experiment
from scramjet.trainer import Trainer


def _images(root: Path, n: int = 4) -> Path:
    for i in range(n):
        Image.fromarray(np.full((20, 24, 3), 40 * i, np.uint8)).save(root / f"{i}.png")
    csv = root / "list.csv"
    csv.write_text("image,label\n" + "".join(f"{i}.png,{i % 2}\n" for i in range(n)))
    return csv


def test_a_frame_larger_than_any_image_opens_is_refused_up_front(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = _images(tmp_path)
    argv = ["pack", str(tmp_path), str(csv), str(tmp_path / "q.pack"), "--dtype", "int64"]
    assert main([*argv, "--height", "99999", "--width", "99999", "--encode", "raw"]) == 1
    err = capsys.readouterr().err
    assert "99999 x 99999" in err and "MAX_IMAGE_PIXELS" in err and "27.9 GiB" in err, err
    assert not [p for p in tmp_path.iterdir() if "q.pack" in p.name]  # nothing was started
    with pytest.raises(ValueError, match="at most 65500 pixels on a side"):
        pack(tmp_path, csv, tmp_path / "j.pack", dtype=["int64"], height=70000, width=2)
    # the same size is fine where the encoding allows it
    pack(tmp_path, csv, tmp_path / "p.pack", dtype=["int64"], height=70000, width=2,
         encode="png", workers=0, progress=False)  # fmt: skip
    assert (tmp_path / "p.pack" / "manifest.json").is_file()


def test_an_encoding_failure_is_not_called_an_unreadable_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scramjet.data import writer

    def refuse(*args: object, **kwargs: object) -> bytes:
        raise OSError("encoder error -2")

    monkeypatch.setattr(writer, "encode_image", refuse)
    monkeypatch.setattr(writer, "encode_pixels", lambda *a, **k: None)
    csv = _images(tmp_path)
    with pytest.raises(PackError) as caught:
        pack(tmp_path, csv, tmp_path / "e.pack", dtype=["int64"], height=8, width=8,
             encode="png", workers=0, progress=False)  # fmt: skip
    message = str(caught.value)
    assert "cannot encode image '0.png' as png at 8 x 8" in message, message
    assert "cannot read image" not in message, message


def _run(root: Path, lr: float = 0.1) -> Path:
    torch.manual_seed(0)
    x = torch.randn(16, 4)
    data = list(zip(x, (x.sum(dim=1) > 0).long()))
    model = torch.nn.Linear(4, 2)
    exp = Experiment("proj", "run", root=root, checkpoint=None)
    trainer = Trainer(model, torch.nn.CrossEntropyLoss(),
                      torch.optim.SGD(model.parameters(), lr=lr), callbacks=[exp])  # fmt: skip
    trainer.train(data, num_epochs=1, per_device_batch_size=8)
    exp.log_results("test", {"accuracy": 0.9, "flag": True})
    return exp.run_dir


def test_runs_offers_only_numeric_results_and_reads_an_empty_run_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run(tmp_path)
    assert main(["runs", str(tmp_path), "--metrics", "test/accuracy,flag"]) == 0
    captured = capsys.readouterr()
    assert "0.9" in captured.out
    assert "no run has a metric named 'flag'" in captured.err, captured.err
    known = captured.err.split("known:", 1)[1]
    assert "flag" not in known and "accuracy" in known, captured.err
    empty = tmp_path / "proj" / "blank"
    empty.mkdir()
    (empty / "run.json").write_text("{}")
    assert main(["runs", str(tmp_path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "proj/blank" in x)
    assert "unknown" in line and "unreadable" not in line, line
    (empty / "run.json").write_text("{not json")  # a damaged file is still said to be
    assert main(["runs", str(tmp_path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "proj/blank" in x)
    assert "unreadable" in line, line


def test_a_nan_learning_rate_of_one_group_is_one_value(tmp_path: Path) -> None:
    from scramjet.tracking._params import optimizer_settings

    model = torch.nn.Linear(2, 1)
    one = torch.optim.SGD(model.parameters(), lr=float("nan"))
    assert np.isnan(optimizer_settings(one)["lr"])
    two = torch.optim.SGD(
        [{"params": [model.weight]}, {"params": [model.bias], "lr": 0.1}], lr=float("nan")
    )
    assert optimizer_settings(two)["lr"]["per_group"][1] == 0.1
    saved = json.loads((_run(tmp_path, lr=float("nan")) / "hyperparams.json").read_text())
    assert saved["optimizer"]["lr"] == "NaN", saved["optimizer"]  # one value, not per group
