"""The mistakes everyone makes: each fails early, says what was received and how to fix it,
and none trains wrongly in silence."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from PIL import Image
from tests.common.world import TinyMLP, blobs, make_trainer
from torch import nn
from torch.utils.data import DataLoader, Dataset, IterableDataset

from scramjet import Trainer
from scramjet.callbacks import EarlyStoppingCallback, PrintProgressCallback, SaveBestModelCallback


class _Stream(IterableDataset[tuple[torch.Tensor, torch.Tensor]]):
    """``n`` samples of ``blobs``; with ``once=True`` its __iter__ hands out one iterator
    made in __init__, so a second epoch finds it spent."""

    def __init__(self, n: int, *, once: bool = False) -> None:
        self.data = blobs(n=max(n, 1))
        self.n = n
        self._it = self._samples() if once else None

    def _samples(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for i in range(self.n):
            yield self.data[i]

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return self._it if self._it is not None else self._samples()


class _Sequences(Dataset[tuple[torch.Tensor, int]]):
    """Token sequences of lengths 1, 2, 3, ... (no padding)."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return torch.arange(i + 1) % 10, i % 3


class _Images(Dataset[tuple[Any, int]]):
    """PIL images, as read from disk without a transform."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> tuple[Any, int]:
        return Image.new("RGB", (2, 2)), i % 3


class _Bag(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(10, 3)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.bag(tokens)


# ---------------------------------------------------------------- fixed here
def test_a_callback_class_passed_alone_is_named_in_the_error() -> None:
    # It said "received a single type. Pass callbacks=[type(...)]".
    with pytest.raises(TypeError) as info:
        make_trainer(callbacks=PrintProgressCallback)  # type: ignore[arg-type]
    message = str(info.value)
    assert "the class PrintProgressCallback" in message
    assert "callbacks=[PrintProgressCallback(...)]" in message
    assert "type(" not in message


def test_a_layer_replaced_after_the_optimizer_was_created_warns_that_it_will_not_train() -> None:
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model[2] = nn.Linear(16, 3)  # a new head, never given to the optimizer
    with pytest.warns(UserWarning, match=r"2 trainable parameter\(s\).*'2\.weight', '2\.bias'"):
        Trainer(model, nn.CrossEntropyLoss(), optimizer, callbacks=[])


def test_an_optimizer_over_the_frozen_part_only_warns_about_the_trainable_part() -> None:
    model = nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 3))
    model[0].requires_grad_(False)
    optimizer = torch.optim.SGD(model[0].parameters(), lr=0.1)  # the frozen layer's
    with pytest.warns(UserWarning, match="'1.weight', '1.bias'.*Create the optimizer after"):
        Trainer(model, nn.CrossEntropyLoss(), optimizer, callbacks=[])


def test_frozen_parameters_left_out_of_the_optimizer_give_no_warning() -> None:
    model = TinyMLP()
    model.net[0].requires_grad_(False)
    trainable = [p for p in model.parameters() if p.requires_grad]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Trainer(model, nn.CrossEntropyLoss(), torch.optim.SGD(trainable, lr=0.1), callbacks=[])


@pytest.mark.parametrize("kind", ["iterable_dataset", "generator"])
def test_an_empty_stream_is_an_error_not_a_nan_epoch(kind: str) -> None:
    data: Any = _Stream(0) if kind == "iterable_dataset" else iter([])
    trainer = make_trainer()
    with pytest.raises(ValueError, match=r"yielded no batch in epoch 1.*NaN"):
        trainer.train(data, num_epochs=1, per_device_batch_size=4)
    assert trainer.run_history.get_metric_values("train_loss_epoch") == []


def test_a_stream_that_does_not_start_over_fails_in_its_second_epoch() -> None:
    trainer = make_trainer()
    with pytest.raises(ValueError, match=r"epoch 2.*__iter__ must return a new iterator"):
        trainer.train(_Stream(8, once=True), num_epochs=2, per_device_batch_size=4)
    assert len(trainer.run_history.get_metric_values("train_loss_epoch")) == 1


def test_a_stream_with_batches_trains_as_before() -> None:
    trainer = make_trainer()
    trainer.train(_Stream(8), num_epochs=2, per_device_batch_size=4)
    assert trainer.state.global_step == 4


def test_sequences_of_different_lengths_fail_with_a_hint_to_pad() -> None:
    trainer = make_trainer(_Bag())
    with pytest.raises(RuntimeError, match="stack expects each tensor") as info:
        trainer.train(_Sequences(), num_epochs=1, per_device_batch_size=4)
    message = str(info.value)
    assert message.startswith("train_dataset: torch's default_collate could not make a batch")
    assert "pad_sequence" in message and "collate_fn" in message
    assert trainer.state.global_step == 0


def test_evaluation_data_of_different_lengths_is_named_as_such() -> None:
    trainer = make_trainer(_Bag())
    with pytest.raises(RuntimeError, match=r"^the evaluation/prediction dataset: .*pad"):
        trainer.predict(_Sequences(), per_device_batch_size=4)


def test_pil_images_fail_with_a_hint_to_convert_them_to_tensors() -> None:
    trainer = make_trainer(nn.Sequential(nn.Flatten(), nn.Linear(12, 3)))
    with pytest.raises(TypeError, match="PIL images: convert them to tensors"):
        trainer.train(_Images(), num_epochs=1, per_device_batch_size=4)


def test_a_collate_fn_of_ones_own_is_used_as_given() -> None:
    def pad(samples: list[tuple[torch.Tensor, int]]) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = nn.utils.rnn.pad_sequence([s[0] for s in samples], batch_first=True)
        return tokens, torch.tensor([s[1] for s in samples])

    trainer = make_trainer(_Bag())
    trainer.train(_Sequences(), num_epochs=1, per_device_batch_size=4, collate_fn=pad)
    assert trainer.state.global_step == 2


def test_sequences_batched_one_by_one_need_no_collate_fn() -> None:
    trainer = make_trainer(_Bag())
    trainer.train(_Sequences(), num_epochs=1, per_device_batch_size=1)
    assert trainer.state.global_step == 8


@pytest.mark.parametrize("container", [tuple, list])
@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_inputs_and_targets_arrays_passed_as_the_dataset_point_to_tensordataset(
    container: type, kind: str
) -> None:
    x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
    arrays = container((x, y) if kind == "torch" else (x.numpy(), y.numpy()))
    trainer = make_trainer()
    with pytest.raises(TypeError, match=r"2 arrays .*\[16, 8\].*\[16\].*TensorDataset"):
        trainer.train(arrays, num_epochs=1)
    with pytest.raises(TypeError, match=r"^dataset is a .*TensorDataset"):
        trainer.evaluate(arrays)


def test_a_list_of_samples_is_still_a_list_of_samples() -> None:
    trainer = make_trainer()
    pairs = [(torch.randn(8), torch.tensor(i % 3)) for i in range(4)]
    trainer.train(pairs, num_epochs=1, per_device_batch_size=2)
    assert trainer.predict([torch.randn(8), torch.randn(8)]).shape == (2, 3)


# ---------------------------------------------------------------- left to files of others
def test_a_scheduler_built_on_another_optimizer_is_refused() -> None:
    trainer = make_trainer()
    other = torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(other, step_size=1, gamma=0.1)
    with pytest.raises(ValueError, match="optimizer"):
        trainer.train(
            blobs(n=8),
            num_epochs=1,
            per_device_batch_size=4,
            create_scheduler_fn=lambda o: scheduler,
        )
    assert trainer.state.global_step == 0


def test_a_regression_target_shape_that_broadcasts_is_an_error() -> None:
    x = torch.randn(16, 4)
    data = torch.utils.data.TensorDataset(x, x.sum(1))  # [N] targets for a [N, 1] output
    trainer = make_trainer(nn.Linear(4, 1), loss=nn.MSELoss())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(ValueError, match=r"\(4, 1\).*\(4,\)"):
            trainer.train(data, num_epochs=1, per_device_batch_size=4)


def test_targets_of_the_wrong_shape_for_the_loss_are_named_with_their_shapes() -> None:
    x = torch.randn(16, 8)
    data = torch.utils.data.TensorDataset(x, torch.randint(0, 3, (16, 1)))  # [N, 1] labels
    with pytest.raises(RuntimeError, match=r"\(4, 3\).*\(4, 1\)"):
        make_trainer().train(data, num_epochs=1, per_device_batch_size=4)


@pytest.mark.parametrize("callback", [EarlyStoppingCallback, SaveBestModelCallback])
def test_watching_an_eval_metric_without_eval_data_is_said_before_the_first_epoch(
    callback: type[Any], tmp_path: Any
) -> None:
    kwargs = {"save_path": str(tmp_path / "best.pt")} if callback is SaveBestModelCallback else {}
    trainer = make_trainer(callbacks=[callback(**kwargs)])
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*eval_dataset", category=UserWarning)
        with pytest.raises(Exception) as raised:  # the warning, made an error, ends the run
            trainer.train(blobs(n=8), num_epochs=2, per_device_batch_size=4)
    cause = raised.value.__cause__ or raised.value
    assert isinstance(cause, UserWarning) and "'eval_loss_epoch'" in str(cause), cause
    assert trainer.state.global_step == 0, "said at the start, before any step"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_device_cuda_without_cuda_fails_at_construction_naming_the_fix() -> None:
    with pytest.raises((ValueError, RuntimeError), match="'cuda'") as info:
        make_trainer(device="cuda")
    assert "cpu" in str(info.value)  # the way out: device="cpu", or None to choose


def test_a_ready_dataloader_records_its_own_batch_size() -> None:
    trainer = make_trainer()
    trainer.train(DataLoader(blobs(n=16), batch_size=4), num_epochs=1)
    assert trainer.run_config.train_per_device_batch_size == 4


def test_an_empty_evaluation_stream_is_an_error_not_a_nan_loss() -> None:
    trainer = make_trainer()
    with pytest.raises(ValueError, match="no batch"):
        trainer.train(blobs(n=8), num_epochs=1, eval_dataset=_Stream(0), per_device_batch_size=4)
