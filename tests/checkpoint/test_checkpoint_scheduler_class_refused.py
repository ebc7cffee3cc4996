"""A scheduler state saved from another class is refused, whichever way its keys differ.

Only a state whose keys differed both ways was refused: StepLR's state (gamma 0.1,
step_size) loaded into an ExponentialLR(gamma=0.99) silently, which then decayed the
learning rate tenfold at every step. Files now record each entry's class; files written
before that are judged by their keys (a setting the scheduler does not define refuses).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from scramjet import Trainer
from scramjet.callbacks import SaveTrainingStateCallback
from scramjet.checkpoint import CheckpointManager, CheckpointMismatchError
from scramjet.checkpoint.payload import build_payload, write_checked

L = torch.optim.lr_scheduler
Make = Callable[[torch.optim.Optimizer], Any]

PAIRS: dict[str, tuple[Make, Make, str]] = {
    "StepLR into ExponentialLR": (
        lambda o: L.StepLR(o, 10, 0.1),
        lambda o: L.ExponentialLR(o, 0.99),
        r"saved from StepLR, not from the ExponentialLR.*holds \['step_size'\]",
    ),
    "MultiStepLR into ExponentialLR": (
        lambda o: L.MultiStepLR(o, [30], 0.1),
        lambda o: L.ExponentialLR(o, 0.99),
        r"saved from MultiStepLR, not from the ExponentialLR.*\['milestones'\]",
    ),
    "ExponentialLR into StepLR": (
        lambda o: L.ExponentialLR(o, 0.5),
        lambda o: L.StepLR(o, 10, 0.1),
        r"saved from ExponentialLR, not from the StepLR.*lacks \['step_size'\]",
    ),
    "LambdaLR into MultiplicativeLR": (
        lambda o: L.LambdaLR(o, lambda epoch: 1.0),
        lambda o: L.MultiplicativeLR(o, lambda epoch: 0.5),
        r"saved from LambdaLR, not from the MultiplicativeLR",
    ),
}


def _objects(make: Make, lr: float = 1.0) -> tuple[nn.Module, torch.optim.Optimizer, Any]:
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    return model, optimizer, make(optimizer)


def _save(folder: Path, make: Make) -> None:
    model, optimizer, scheduler = _objects(make)
    for _ in range(3):
        optimizer.step()
        scheduler.step()
    with CheckpointManager(folder, async_write=False) as manager:
        manager.save({"model": model, "optimizer": optimizer, "scheduler": scheduler}, step=3)


@pytest.mark.parametrize("pair", list(PAIRS))
def test_a_scheduler_of_another_class_is_refused(tmp_path: Path, pair: str) -> None:
    saved_with, loaded_into, message = PAIRS[pair]
    _save(tmp_path, saved_with)
    model, optimizer, scheduler = _objects(loaded_into)
    before = dict(scheduler.state_dict())
    with pytest.raises(CheckpointMismatchError, match=message) as raised:
        CheckpointManager(tmp_path).load(
            {"model": model, "optimizer": optimizer, "scheduler": scheduler}
        )
    assert "entry 'scheduler'" in str(raised.value)
    assert "Resume with the optimizer and scheduler the checkpoint was saved with" in str(
        raised.value
    )
    assert scheduler.state_dict().keys() == before.keys()
    assert getattr(scheduler, "gamma", None) == before.get("gamma")
    assert optimizer.param_groups[0]["lr"] == 1.0  # nothing was restored

    # strict=False: the scheduler is left as it was, and the report says so
    with pytest.warns(UserWarning, match="scheduler missing"):
        result = CheckpointManager(tmp_path).load(
            {"model": model, "optimizer": optimizer, "scheduler": scheduler}, strict=False
        )
    assert "scheduler" in result.missing_keys
    assert getattr(scheduler, "gamma", None) == before.get("gamma")


def test_the_same_class_and_a_subclass_of_it_load(tmp_path: Path) -> None:
    class LoggedStepLR(L.StepLR):
        pass

    _save(tmp_path, lambda o: L.StepLR(o, 10, 0.5))
    for make in (lambda o: L.StepLR(o, 4, 0.9), lambda o: LoggedStepLR(o, 4, 0.9)):
        model, optimizer, scheduler = _objects(make)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            CheckpointManager(tmp_path).load(
                {"model": model, "optimizer": optimizer, "scheduler": scheduler}
            )
        assert (scheduler.step_size, scheduler.gamma, scheduler.last_epoch) == (10, 0.5, 3)


def _write_old_file(folder: Path, scheduler_state: dict[str, Any]) -> None:
    """A checkpoint as scramjet wrote it before files recorded their entries' classes."""
    model = nn.Linear(2, 1)
    payload = build_payload(
        {"model": model, "scheduler": scheduler_state}, seq=1, step=3, epoch=None, metrics=None
    )
    payload["stateful"].append("scheduler")  # saved through state_dict(), as then
    assert "classes" not in payload
    folder.mkdir(exist_ok=True)
    write_checked(
        folder / "ckpt-000001-step3.pt", lambda file: torch.save(payload, file), fsync=False
    )


def test_files_without_a_class_record_are_judged_by_their_keys(tmp_path: Path) -> None:
    _, _, step_lr = _objects(lambda o: L.StepLR(o, 10, 0.1))
    _write_old_file(tmp_path / "step", step_lr.state_dict())
    model, _, scheduler = _objects(lambda o: L.ExponentialLR(o, 0.99))
    with pytest.raises(CheckpointMismatchError, match=r"another kind of scheduler.*step_size"):
        CheckpointManager(tmp_path / "step").load({"model": model, "scheduler": scheduler})
    assert scheduler.gamma == 0.99

    # The same class from an older torch (a 'verbose' setting it no longer has, a setting
    # it added since missing) still loads.
    _, _, plateau = _objects(lambda o: L.ReduceLROnPlateau(o, factor=0.2, patience=7))
    old = {k: v for k, v in plateau.state_dict().items() if k != "default_min_lr"}
    _write_old_file(tmp_path / "plateau", {**old, "verbose": False})
    model, _, scheduler = _objects(lambda o: L.ReduceLROnPlateau(o))
    CheckpointManager(tmp_path / "plateau").load({"model": model, "scheduler": scheduler})
    assert (scheduler.factor, scheduler.patience) == (0.2, 7)


def _trainer(folder: Path) -> Trainer:
    torch.manual_seed(0)
    model = nn.Linear(2, 1)
    return Trainer(
        model,
        nn.MSELoss(),
        torch.optim.SGD(model.parameters(), lr=1.0),
        callbacks=[SaveTrainingStateCallback(folder)],
        seed=0,
    )


def test_a_run_resumed_with_another_scheduler_class_is_refused(tmp_path: Path) -> None:
    data = torch.utils.data.TensorDataset(torch.randn(32, 2), torch.randn(32, 1))
    _trainer(tmp_path).train(
        data,
        num_epochs=1,
        per_device_batch_size=8,
        create_scheduler_fn=lambda opt: L.StepLR(opt, 100, 0.1),
    )
    trainer = _trainer(tmp_path)
    with pytest.raises(
        CheckpointMismatchError, match="saved from StepLR, not from the ExponentialLR"
    ):
        trainer.train(
            data,
            num_epochs=2,
            per_device_batch_size=8,
            resume_from=tmp_path,
            create_scheduler_fn=lambda opt: L.ExponentialLR(opt, 0.99),
        )
