"""SaveBestModelCallback and ModelEmaCallback(save_path=...) check at the run's start that
their file can be written, as SaveTrainingStateCallback does for its folder: a path under
a file, or a path that is a folder, used to fail only at the first save (after an epoch,
or after the whole run for the EMA weights), losing that training."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.common.world import TinyMLP, blobs, make_trainer

from scramjet.callbacks import ModelEmaCallback, SaveBestModelCallback


def _best(path: Path) -> Any:
    return SaveBestModelCallback(path, watch_metric="train_loss_epoch")


def _ema(path: Path) -> Any:
    return ModelEmaCallback(decay=0.9, save_path=path)


@pytest.mark.parametrize("make", [_best, _ema], ids=["best_model", "ema"])
@pytest.mark.parametrize("where", ["under_a_file", "a_folder"])
def test_an_unwritable_save_path_stops_the_run_before_its_first_step(
    tmp_path: Path, make: Any, where: str
) -> None:
    (tmp_path / "afile").write_text("not a folder")
    (tmp_path / "folder").mkdir()
    path = tmp_path / ("afile/model.pt" if where == "under_a_file" else "folder")
    callback = make(path)
    trainer = make_trainer(TinyMLP(), callbacks=[callback])
    with pytest.raises(Exception, match=type(callback).__name__) as info:
        trainer.train(blobs(n=8), num_epochs=2, per_device_batch_size=4)
    assert trainer.state.global_step == 0, "no training is lost"
    message = str(info.value)
    assert str(path) in message and "save_path" in message, message


@pytest.mark.parametrize("make", [_best, _ema], ids=["best_model", "ema"])
def test_a_save_path_in_folders_still_to_create_is_written(tmp_path: Path, make: Any) -> None:
    path = tmp_path / "new" / "dir" / "model.pt"
    trainer = make_trainer(TinyMLP(), callbacks=[make(path)])
    trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=4)
    assert path.is_file()
    assert [p.name for p in path.parent.iterdir()] == ["model.pt"], "no check file left behind"
