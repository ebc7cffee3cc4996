"""Files written by pytorch-accelerated itself whose checkpoint_kwargs hold numpy scalars."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from scramjet.compat.pytorch_accelerated import Trainer


def _trainer() -> Trainer:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    return Trainer(model, torch.nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.1))


def _peer_file(path: Path, trainer: Trainer, **kwargs: object) -> None:
    # As pytorch-accelerated's Trainer.save_checkpoint writes it: plain torch.save.
    torch.save(
        {
            "model_state_dict": trainer.model.state_dict(),
            "optimizer_state_dict": trainer.optimizer.state_dict(),
            **kwargs,
        },
        path,
    )


def test_numpy_scalar_metrics_of_a_peer_file_load(tmp_path: Path) -> None:
    source = _trainer()
    with torch.no_grad():
        source.model.weight.fill_(0.25)
    path = tmp_path / "best_model.pt"
    _peer_file(
        path,
        source,
        best_metric=np.float64(0.125),
        epoch=np.int64(4),
        flags=[np.bool_(True), np.float32(2.5)],
        kind=np.dtype("float32"),
    )
    target = _trainer()
    values = target.load_checkpoint(path)
    assert torch.equal(target.model.weight, torch.full((2, 3), 0.25))
    assert values["best_metric"] == 0.125 and isinstance(values["best_metric"], np.float64)
    assert values["epoch"] == 4 and values["flags"] == [True, 2.5]
    assert values["kind"] == np.dtype("float32")


class _Code:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (print, ("code from the file ran",))


def test_code_in_a_peer_file_is_still_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "best_model.pt"
    _peer_file(path, _trainer(), best_metric=np.float64(0.5), hook=_Code())
    with pytest.raises(Exception, match=r"print.*weights_only=True"):
        _trainer().load_checkpoint(path)
    assert "ran" not in capsys.readouterr().out


def test_numpy_object_arrays_stay_refused(tmp_path: Path) -> None:
    # Numeric arrays load (test_pa_old_checkpoint_numpy_arrays.py); arrays of objects do not.
    path = tmp_path / "best_model.pt"
    _peer_file(path, _trainer(), history=np.array([1.0, "a"], dtype=object))
    with pytest.raises(Exception, match=r"dtype=object"):
        _trainer().load_checkpoint(path)
