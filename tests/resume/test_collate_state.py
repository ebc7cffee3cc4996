"""The random state of the training collate function is saved and restored on resume.

What is checked:

- A collate function of the user's that draws from a generator of its own, saved through
  its ``state_dict``/``load_state_dict`` or found as a ``torch.Generator`` attribute, draws
  the same noise after a mid-epoch resume as the uninterrupted run, which ends with the
  same weights.
- A checkpoint without that state (older files; a stateless collate function) still
  resumes: a collate function with a ``state_dict`` starts fresh, with a warning.
- A saved state that does not fit this run's collate function is named in a warning
  (what was saved, what this run has, how to fix it); a ``load_state_dict`` that refuses
  it is a ``CheckpointMismatchError``.
- With ``num_workers=2`` the collate function runs in the worker processes, on copies:
  a resume at an epoch boundary draws as the uninterrupted run.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import TensorDataset

from scramjet import Trainer
from scramjet.callbacks import SaveTrainingStateCallback, TrainerCallback
from scramjet.checkpoint import CheckpointMismatchError
from scramjet.checkpoint.manager import read_checkpoint

STEPS = 12  # 2 epochs of 6 batches


def stack(samples: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.stack([s[0] for s in samples]), torch.stack([s[1] for s in samples])


class GeneratorCollate:
    """Adds noise drawn from a ``torch.Generator`` attribute to the inputs."""

    def __init__(self) -> None:
        self.generator = torch.Generator().manual_seed(5)

    def __call__(self, samples: list[Any]) -> tuple[torch.Tensor, torch.Tensor]:
        inputs, targets = stack(samples)
        return inputs + torch.randn(inputs.shape, generator=self.generator), targets


class StatefulCollate(GeneratorCollate):
    """The same noise, and a count of its calls, saved through its own ``state_dict``."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __call__(self, samples: list[Any]) -> tuple[torch.Tensor, torch.Tensor]:
        self.calls += 1
        return super().__call__(samples)

    def state_dict(self) -> dict[str, Any]:
        return {"generator": self.generator.get_state(), "calls": self.calls}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generator.set_state(state["generator"])
        self.calls = int(state["calls"])


class RenamedCollate:
    """Noise from a generator under another attribute name than GeneratorCollate's."""

    def __init__(self) -> None:
        self.rng = torch.Generator().manual_seed(5)

    def __call__(self, samples: list[Any]) -> tuple[torch.Tensor, torch.Tensor]:
        inputs, targets = stack(samples)
        return inputs + torch.randn(inputs.shape, generator=self.rng), targets


class RefusingCollate(StatefulCollate):
    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise KeyError("position")


class Record(TrainerCallback):
    """Keeps every training batch's inputs; raises after update ``stop_at``."""

    def __init__(self, stop_at: int | None) -> None:
        self.inputs: list[torch.Tensor] = []
        self.stop_at = stop_at

    def on_train_step_end(self, trainer: Trainer, batch: Any = None, **kwargs: Any) -> None:
        self.inputs.append(batch[0].clone())

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.global_step == self.stop_at:
            raise RuntimeError("crash")


def run(
    folder: Path,
    collate: Any,
    *,
    stop_at: int | None = None,
    resume: bool = False,
    num_workers: int = 0,
) -> tuple[Trainer, Record]:
    """2 epochs of 6 batches, a checkpoint every 2 updates; crash after ``stop_at``."""
    data = TensorDataset(torch.randn(24, 3, generator=torch.Generator().manual_seed(1)),
                         torch.randn(24, 1, generator=torch.Generator().manual_seed(2)))  # fmt: skip
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    record = Record(stop_at)
    trainer = Trainer(
        model, torch.nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.1), seed=0,
        callbacks=[record, SaveTrainingStateCallback(folder, every_n_steps=2)],
    )  # fmt: skip
    try:
        trainer.train(
            data, num_epochs=2, per_device_batch_size=4, collate_fn=collate,
            train_dataloader_kwargs={"num_workers": num_workers},
            resume_from=folder if resume else None,
        )  # fmt: skip
    except RuntimeError:
        if stop_at is None:
            raise
    return trainer, record


def assert_same_draws(expected: list[torch.Tensor], got: list[torch.Tensor]) -> None:
    assert len(got) == len(expected)
    for want, have in zip(expected, got, strict=True):
        assert torch.equal(want, have)


@pytest.mark.parametrize("collate_type", [StatefulCollate, GeneratorCollate])
def test_a_resumed_run_draws_in_its_collate_function_as_the_uninterrupted_run(
    tmp_path: Path, collate_type: type[GeneratorCollate]
) -> None:
    whole, whole_record = run(tmp_path / "whole", collate_type())
    run(tmp_path / "cut", collate_type(), stop_at=9)
    collate = collate_type()
    resumed, record = run(tmp_path / "cut", collate, resume=True)

    assert_same_draws(whole_record.inputs[-4:], record.inputs)  # saved at update 8 of 12
    assert resumed.state.global_step == STEPS
    for name, value in whole.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[name])
    if isinstance(collate, StatefulCollate):
        assert collate.calls == STEPS  # 8 restored, 4 more


def test_a_checkpoint_without_collate_state_resumes_and_a_stateful_collate_starts_fresh(
    tmp_path: Path,
) -> None:
    run(tmp_path / "a", stack, stop_at=9)  # a stateless collate function: nothing saved for it
    newest = sorted((tmp_path / "a").glob("ckpt-*.pt"))[-1]
    assert "collate_state" not in read_checkpoint(newest)["state"]
    shutil.copytree(tmp_path / "a", tmp_path / "b")

    with pytest.warns(UserWarning, match=r"no state for the collate function \(StatefulCollate\)"):
        resumed, record = run(tmp_path / "a", StatefulCollate(), resume=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet, _ = run(tmp_path / "b", GeneratorCollate(), resume=True)

    assert resumed.state.global_step == quiet.state.global_step == STEPS
    assert len(record.inputs) == 4


def test_collate_state_that_does_not_fit_is_named_in_a_warning(tmp_path: Path) -> None:
    run(tmp_path, GeneratorCollate(), stop_at=9)

    with pytest.warns(UserWarning, match="collate function GeneratorCollate") as caught:
        resumed, _ = run(tmp_path, RenamedCollate(), resume=True)

    text = str(caught[0].message)
    assert "torch.Generator attribute(s) 'generator'" in text  # what was saved
    assert "(RenamedCollate) has no torch.Generator attribute 'generator'" in text
    assert "train(collate_fn=...)" in text  # how to fix it
    assert resumed.state.global_step == STEPS


def test_a_collate_function_that_refuses_its_saved_state_is_an_error(tmp_path: Path) -> None:
    run(tmp_path, StatefulCollate(), stop_at=9)

    with pytest.raises(CheckpointMismatchError) as raised:
        run(tmp_path, RefusingCollate(), resume=True)

    text = str(raised.value)
    assert "(RefusingCollate).load_state_dict() refused" in text
    assert "the state saved from StatefulCollate" in text
    assert "KeyError" in text
    assert "load_training_state=False" in text


def test_with_loader_workers_a_resume_at_an_epoch_boundary_draws_as_the_uninterrupted_run(
    tmp_path: Path,
) -> None:
    _, whole = run(tmp_path / "whole", GeneratorCollate(), num_workers=2)
    run(tmp_path / "cut", GeneratorCollate(), stop_at=7, num_workers=2)
    _, resumed = run(tmp_path / "cut", GeneratorCollate(), resume=True, num_workers=2)

    assert_same_draws(whole.inputs[6:], resumed.inputs)  # saved at update 6: epoch 2 whole
