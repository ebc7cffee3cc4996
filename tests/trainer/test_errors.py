"""Bad input fails early with a message saying what was received, what was expected, how to fix."""

from __future__ import annotations

import re

import pytest
import torch
from tests.common.world import TinyMLP, blobs, make_trainer
from torch import nn

from scramjet import Trainer


@pytest.mark.parametrize(
    "bad", [5, object(), "data.csv", {"x": 1}], ids=["int", "object", "str", "dict"]
)
def test_dataset_that_is_not_a_dataset(bad: object) -> None:
    trainer = make_trainer(TinyMLP())
    with pytest.raises(TypeError, match="train_dataset") as info:
        trainer.train(bad, num_epochs=1)
    assert type(bad).__name__ in str(info.value)


def test_dataset_error_names_the_fix() -> None:
    with pytest.raises(TypeError, match=re.escape("TensorDataset")):
        make_trainer(TinyMLP()).train(object(), num_epochs=1)


def test_eval_dataset_is_checked_before_training() -> None:
    trainer = make_trainer(TinyMLP())
    with pytest.raises(TypeError, match="eval_dataset"):
        trainer.train(blobs(n=8), num_epochs=1, eval_dataset=3.5)
    assert trainer.state.global_step == 0


@pytest.mark.parametrize("bs", [0, -4, 2.5, True])
def test_batch_size_must_be_positive_int(bs: object) -> None:
    with pytest.raises(
        ValueError,
        match=rf"per_device_batch_size must be a positive int .*; received {re.escape(repr(bs))}"
        r"\. Pass e\.g\. per_device_batch_size=32",
    ):
        make_trainer(TinyMLP()).train(blobs(n=8), num_epochs=1, per_device_batch_size=bs)  # type: ignore[arg-type]


@pytest.mark.parametrize("epochs", [0, -1, 1.5])
def test_num_epochs_must_be_at_least_one(epochs: object) -> None:
    with pytest.raises(
        ValueError,
        match=rf"num_epochs must be an int ≥ 1; received {re.escape(repr(epochs))}\. "
        r"Pass e\.g\. num_epochs=1",
    ):
        make_trainer(TinyMLP()).train(blobs(n=8), num_epochs=epochs)  # type: ignore[arg-type]


def test_gradient_accumulation_steps_checked() -> None:
    with pytest.raises(
        ValueError, match="gradient_accumulation_steps must be an int ≥ 1; received 0"
    ):
        make_trainer(TinyMLP()).train(blobs(n=8), num_epochs=1, gradient_accumulation_steps=0)


def test_loss_that_is_not_a_scalar() -> None:
    trainer = make_trainer(TinyMLP(), loss=nn.CrossEntropyLoss(reduction="none"))
    with pytest.raises(
        ValueError, match=r"scalar tensor; received a tensor of shape \(4,\).*reduction='mean'"
    ):
        trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=4)


def test_loss_that_is_not_a_tensor() -> None:
    trainer = make_trainer(TinyMLP(), loss=lambda out, y: 1.0)
    with pytest.raises(ValueError, match="scalar tensor; received float"):
        trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=4)


@pytest.mark.parametrize(
    ("loss", "expected"),
    [
        (nn.CrossEntropyLoss(reduction="none"), r"a tensor of shape \(2,\)"),
        (lambda out, y: 1.0, "float"),
    ],
    ids=["per-sample", "float"],
)
def test_eval_loss_is_checked_too(loss: object, expected: str) -> None:
    """evaluate() used to average a per-sample loss silently, or fail on float.detach."""
    trainer = make_trainer(TinyMLP(), loss=loss)
    with pytest.raises(ValueError, match=rf"calculate_eval_batch_loss.*received {expected}"):
        trainer.evaluate(blobs(n=4), per_device_batch_size=2)


def test_optimizer_without_model_parameters() -> None:
    model, other = TinyMLP(), TinyMLP()
    optimizer = torch.optim.SGD(other.parameters(), lr=0.1)
    with pytest.raises(
        ValueError,
        match=r"holds 4 parameter\(s\), none of which belong to the model.*model.parameters\(\)",
    ):
        Trainer(model, nn.CrossEntropyLoss(), optimizer, callbacks=())


def test_optimizer_of_wrong_type() -> None:
    model = TinyMLP()
    with pytest.raises(TypeError, match=r"received list.*torch\.optim\.AdamW"):
        Trainer(model, nn.CrossEntropyLoss(), list(model.parameters()), callbacks=())  # type: ignore[arg-type]


def test_model_of_wrong_type() -> None:
    with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module; received function"):
        Trainer(
            lambda x: x,
            nn.CrossEntropyLoss(),
            torch.optim.SGD(TinyMLP().parameters()),  # type: ignore[arg-type]
            callbacks=(),
        )


def test_unknown_precision_string() -> None:
    with pytest.raises(
        ValueError, match=r"Unknown precision 'fp8'. Expected one of 'no', 'bf16', 'fp16'"
    ):
        make_trainer(TinyMLP(), precision="fp8")


def test_callback_of_wrong_type() -> None:
    with pytest.raises(TypeError, match="TrainerCallback instances; received str"):
        make_trainer(TinyMLP(), callbacks=["progress"])


@pytest.mark.parametrize(
    ("name", "value"),
    [("gradient_clip_value", 0.0), ("gradient_clip_norm", -1.0), ("gradient_clip_norm", "1")],
)
def test_clip_thresholds_must_be_positive(name: str, value: object) -> None:
    with pytest.raises(
        ValueError, match=rf"{name} must be a number > 0, or None to disable .* Pass e\.g\. {name}="
    ):
        make_trainer(TinyMLP()).train(blobs(n=8), num_epochs=1, **{name: value})


def test_eval_batch_size_is_checked() -> None:
    with pytest.raises(
        ValueError,
        match=r"eval_per_device_batch_size must be a positive int .*; received -1\. Pass e\.g\.",
    ):
        make_trainer(TinyMLP()).train(
            blobs(n=8), num_epochs=1, eval_dataset=blobs(n=4), eval_per_device_batch_size=-1
        )


def test_loss_class_instead_of_instance() -> None:
    model = TinyMLP()
    with pytest.raises(TypeError, match=r"class CrossEntropyLoss.*loss_func=CrossEntropyLoss\(\)"):
        Trainer(model, nn.CrossEntropyLoss, torch.optim.SGD(model.parameters(), lr=0.1))


def test_loss_that_is_not_callable() -> None:
    model = TinyMLP()
    with pytest.raises(TypeError, match=r"loss_func must be callable .* received str"):
        Trainer(model, "mse", torch.optim.SGD(model.parameters(), lr=0.1))  # type: ignore[arg-type]


def test_a_single_callback_not_in_a_list() -> None:
    from scramjet.callbacks import PrintProgressCallback

    with pytest.raises(TypeError, match=r"single PrintProgressCallback.*callbacks=\["):
        make_trainer(TinyMLP(), callbacks=PrintProgressCallback())


def test_scheduler_fn_that_is_not_callable() -> None:
    with pytest.raises(TypeError, match=r"create_scheduler_fn must be a callable .* str 'cosine'"):
        make_trainer(TinyMLP()).train(blobs(n=8), num_epochs=1, create_scheduler_fn="cosine")


@pytest.mark.parametrize("where", ["train", "eval", "evaluate"])
def test_an_empty_dataset_is_an_error(where: str) -> None:
    trainer = make_trainer(TinyMLP())
    empty = torch.utils.data.TensorDataset(torch.zeros(0, 8), torch.zeros(0, dtype=torch.long))
    with pytest.raises(ValueError, match=r"is empty \(len\(\) == 0\)"):
        if where == "train":
            trainer.train(empty, num_epochs=1)
        elif where == "eval":
            trainer.train(blobs(n=8), num_epochs=1, eval_dataset=empty)
        else:
            trainer.evaluate(empty)


def test_the_same_batch_size_twice_is_fine() -> None:
    trainer = make_trainer(TinyMLP())
    trainer.train(
        blobs(n=16),
        num_epochs=1,
        per_device_batch_size=8,
        train_dataloader_kwargs={"batch_size": 8},
    )
    assert trainer.state.global_step == 2


def test_a_loader_that_gives_no_batch_is_an_error_not_a_silent_nan_run() -> None:
    """drop_last with fewer samples than one batch: nothing would train (a NaN loss)."""
    trainer = make_trainer(TinyMLP())
    with pytest.raises(ValueError, match=r"gives no batch \(train_dataset has 16 sample\(s\), "
                       r"the batch size is 32 per process.*set drop_last=False"):  # fmt: skip
        trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=32,
                      train_dataloader_kwargs={"drop_last": True})  # fmt: skip
    assert trainer.state.global_step == 0
    trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=16,
                  train_dataloader_kwargs={"drop_last": True})  # fmt: skip
    assert trainer.state.global_step == 1  # one full batch is enough
