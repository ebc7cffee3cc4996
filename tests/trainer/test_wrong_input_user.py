"""More of the mistakes everyone makes, in less common settings: the error comes early,
names what was received and how to fix it, and no sample is lost in silence."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from tests.common.world import TinyMLP, blobs, make_trainer
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from scramjet.callbacks import TrainerCallback


class _CountSteps(TrainerCallback):
    def __init__(self) -> None:
        self.steps = 0

    def on_train_step_end(self, trainer: object, **kwargs: object) -> None:
        self.steps += 1


# ----------------------------------------------------------------------------- drop_last
def test_predict_with_drop_last_refuses_to_leave_samples_out() -> None:
    trainer = make_trainer()
    with pytest.raises(ValueError, match=r"one output per sample.*drop_last=True") as info:
        trainer.predict(blobs(n=5), per_device_batch_size=4, dataloader_kwargs={"drop_last": True})
    assert "drop_last" in str(info.value) and "Leave" in str(info.value)


def test_predict_of_a_ready_loader_with_drop_last_refuses_to_leave_samples_out() -> None:
    loader = DataLoader(blobs(n=5), batch_size=4, drop_last=True)
    with pytest.raises(ValueError, match=r"drop_last=True.*1 sample\(s\).*of 5"):
        make_trainer().predict(loader)


def test_predict_of_a_ready_loader_with_drop_last_that_drops_nothing_is_fine() -> None:
    loader = DataLoader(blobs(n=8), batch_size=4, drop_last=True)
    assert make_trainer().predict(loader).shape == (8, 3)


def test_evaluation_data_that_drop_last_empties_fails_before_the_first_epoch() -> None:
    counter = _CountSteps()
    trainer = make_trainer(callbacks=[counter])
    with pytest.raises(ValueError, match=r"eval.*3 sample\(s\).*batch size is 4.*drop_last"):
        trainer.train(
            blobs(n=16), 1, eval_dataset=blobs(n=3), per_device_batch_size=4,
            eval_dataloader_kwargs={"drop_last": True},
        )  # fmt: skip
    assert counter.steps == 0  # no epoch was spent before the error


def test_evaluate_of_data_that_drop_last_empties_names_the_cause() -> None:
    with pytest.raises(ValueError, match=r"3 sample\(s\).*batch size is 4.*drop_last") as info:
        make_trainer().evaluate(blobs(n=3), 4, dataloader_kwargs={"drop_last": True})
    assert "unknown length" not in str(info.value)


# ----------------------------------------------------------------------------- loss hints
def test_targets_beyond_the_models_classes_are_named_with_the_class_count() -> None:
    data = TensorDataset(torch.randn(8, 8), torch.tensor([0, 1, 2, 4, 0, 1, 2, 3]))
    with pytest.raises(IndexError) as info:
        make_trainer(TinyMLP(out=3)).train(data, 1, per_device_batch_size=8)
    text = str(info.value)
    assert "3 classes" in text and "largest target in this batch is 4" in text and "5" in text


def test_sequence_logits_with_classes_last_point_to_moving_the_class_dimension() -> None:
    data = TensorDataset(torch.randn(4, 6, 8), torch.randint(0, 3, (4, 6)))
    with pytest.raises(RuntimeError) as info:
        make_trainer(TinyMLP(out=3)).train(data, 1, per_device_batch_size=4)
    text = str(info.value)
    assert "dimension 1" in text and "transpose(1, 2)" in text


def test_binary_loss_with_integer_targets_asks_for_float_targets_not_class_indices() -> None:
    data = TensorDataset(torch.randn(8, 8), torch.randint(0, 2, (8, 1)))
    with pytest.raises(RuntimeError) as info:
        make_trainer(TinyMLP(out=1), loss=nn.BCEWithLogitsLoss()).train(data, 1)
    text = str(info.value)
    assert "targets.float()" in text
    assert "class indices" not in text  # the cross-entropy advice would mislead here


# ----------------------------------------------------------------------------- __len__ vs __getitem__
class _LongerThanItServes(Dataset[tuple[torch.Tensor, int]]):
    """``__len__`` says 10, but only 8 samples exist (a stale count, a filtered list)."""

    def __init__(self) -> None:
        self.samples = [(torch.randn(8), i % 3) for i in range(8)]

    def __len__(self) -> int:
        return 10

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.samples[i]


@pytest.mark.parametrize("workers", [0, 1])
def test_a_len_longer_than_getitem_serves_names_the_index_and_len_in_training(
    workers: int,
) -> None:
    with pytest.raises(IndexError) as info:
        make_trainer(seed=0).train(
            _LongerThanItServes(), 1, per_device_batch_size=5,
            train_dataloader_kwargs={"num_workers": workers},
        )  # fmt: skip
    text = str(info.value)
    assert "train_dataset" in text and "len() == 10" in text and "[8]" in text
    assert "0..7" in text and "__len__" in text


def test_a_len_longer_than_getitem_serves_is_explained_in_evaluation_and_prediction() -> None:
    trainer = make_trainer()
    for call in (trainer.evaluate, trainer.predict):
        with pytest.raises(IndexError, match=r"len\(\) == 10.*\[8\].*0\.\.7"):
            call(_LongerThanItServes(), 4)


def test_an_index_error_of_the_datasets_own_making_is_left_as_it_is() -> None:
    class Faulty(_LongerThanItServes):
        def __len__(self) -> int:
            return 8

        def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
            if i == 3:
                raise IndexError("label table has no row 3")
            return self.samples[i]

    with pytest.raises(IndexError, match=r"^label table has no row 3$"):
        make_trainer().train(Faulty(), 1, per_device_batch_size=4)


class _NamedLabels(Dataset[tuple[torch.Tensor, str]]):
    """Labels as read from a CSV: class names, not indices."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> tuple[torch.Tensor, str]:
        return torch.randn(8), ["cat", "dog", "bird"][i % 3]


def test_text_labels_reaching_the_loss_point_to_class_indices() -> None:
    with pytest.raises(TypeError) as info:
        make_trainer().train(_NamedLabels(), 1, per_device_batch_size=4)
    text = str(info.value)
    assert "'cat'" in text or "'dog'" in text or "'bird'" in text
    assert "class indices" in text and "classes.index(label)" in text


def test_a_loss_function_of_the_wrong_signature_keeps_its_own_type_error() -> None:
    def loss(outputs: torch.Tensor) -> torch.Tensor:
        return outputs.mean()

    with pytest.raises(TypeError) as info:
        make_trainer(loss=loss).train(blobs(n=8), 1, per_device_batch_size=4)
    assert "received outputs" not in str(info.value)


def test_a_type_error_of_a_loss_over_records_is_left_as_it_is() -> None:
    def loss(outputs: torch.Tensor, targets: list[dict[str, torch.Tensor]]) -> torch.Tensor:
        raise TypeError("boxes must be float")

    data = [(torch.randn(8), {"boxes": torch.zeros(1, 4)}) for _ in range(4)]
    with pytest.raises(TypeError, match=r"^boxes must be float$"):
        make_trainer(loss=loss).train(data, 1, per_device_batch_size=4, collate_fn=_records)


def _records(samples: list[tuple[torch.Tensor, dict[str, torch.Tensor]]]) -> tuple[object, ...]:
    return torch.stack([s[0] for s in samples]), [s[1] for s in samples]


# ----------------------------------------------------------------------------- arguments
def test_evaluation_data_passed_where_num_epochs_goes_says_to_pass_it_by_keyword() -> None:
    with pytest.raises(TypeError) as info:
        make_trainer().train(blobs(n=8), blobs(n=4))  # type: ignore[arg-type]
    text = str(info.value)
    assert "num_epochs" in text and "TensorDataset" in text and "eval_dataset=" in text


# ----------------------------------------------------------------------------- NLLLoss
@pytest.mark.parametrize("head", ["logits", "softmax"])
def test_nll_loss_on_logits_or_probabilities_is_refused_at_the_first_batch(head: str) -> None:
    model = TinyMLP() if head == "logits" else nn.Sequential(TinyMLP(), nn.Softmax(dim=1))
    counter = _CountSteps()
    trainer = make_trainer(model, loss=nn.NLLLoss(), callbacks=[counter])
    with pytest.raises(ValueError, match=r"NLLLoss takes log-probabilities.*log_softmax"):
        trainer.train(blobs(n=16), 1, per_device_batch_size=8)
    assert counter.steps == 0


def test_nll_loss_on_log_softmax_outputs_trains() -> None:
    model = nn.Sequential(TinyMLP(), nn.LogSoftmax(dim=1))
    trainer = make_trainer(model, loss=nn.NLLLoss())
    trainer.train(blobs(n=32), 2, per_device_batch_size=8)
    losses = trainer.run_history.get_metric_values("train_loss_epoch")
    assert all(loss > 0 for loss in losses) and losses[-1] < losses[0]


# ----------------------------------------------------------------------------- resume
def test_resuming_with_fewer_epochs_than_the_checkpoint_holds_says_nothing_is_left(
    tmp_path: Path,
) -> None:
    first = make_trainer(seed=0)
    first.train(blobs(n=16), 3, per_device_batch_size=4)
    first.save_checkpoint(tmp_path / "run.pt")
    resumed = make_trainer(seed=0)
    with pytest.warns(UserWarning, match=r"num_epochs=1.*3 epoch"):
        resumed.train(blobs(n=16), 1, per_device_batch_size=4, resume_from=tmp_path / "run.pt")
    assert resumed.state.global_step == 12  # nothing trained
    with pytest.warns(UserWarning, match=r"max_num_train_steps=5.*12 updates.*12 \+ N"):
        make_trainer(seed=0).train(
            blobs(n=16), 3, per_device_batch_size=4, max_num_train_steps=5,
            resume_from=tmp_path / "run.pt",
        )  # fmt: skip
    with warnings.catch_warnings():  # the same length: a finished run, started again
        warnings.simplefilter("error")
        make_trainer(seed=0).train(
            blobs(n=16), 3, per_device_batch_size=4, resume_from=tmp_path / "run.pt"
        )


def test_a_device_name_torch_does_not_know_says_which_names_work() -> None:
    # torch.device("gpu") ran before the check: its own message listed every device type
    # torch was built with and no way out.
    from scramjet import Trainer

    model = TinyMLP()
    with pytest.raises(ValueError, match=r"device='gpu' is not a device.*'cpu', 'cuda'"):
        Trainer(
            model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), 0.1), device="gpu"
        )
