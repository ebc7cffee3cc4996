"""More mistakes a newcomer makes: each error says what was received, what
was expected and how to fix it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tests.common.world import TinyMLP, blobs
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer


def _trainer(model: nn.Module) -> Trainer:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return Trainer(model, nn.CrossEntropyLoss(), optimizer, callbacks=[])


def _float64_data(n: int = 24) -> TensorDataset:
    """What ``torch.from_numpy`` makes of numpy's default float64 features."""
    x, y = blobs(n=n).tensors
    return TensorDataset(torch.from_numpy(x.numpy().astype(np.float64)), y)


# ------------------------------------------------------------ float64 inputs, float32 model
def test_float64_inputs_in_training_name_both_dtypes_and_the_conversion() -> None:
    trainer = _trainer(TinyMLP())
    with pytest.raises(RuntimeError) as info:
        trainer.train(_float64_data(), num_epochs=1, per_device_batch_size=8)
    text = str(info.value)
    assert "float64" in text and "float32" in text
    assert ".float()" in text and "numpy" in text
    assert isinstance(info.value.__cause__, RuntimeError)  # torch's own error kept


def test_float64_inputs_in_evaluation_and_prediction_are_explained_too() -> None:
    trainer = _trainer(TinyMLP())
    with pytest.raises(RuntimeError, match=r"float64.*float32"):
        trainer.evaluate(_float64_data(), per_device_batch_size=8)
    with pytest.raises(RuntimeError, match=r"float64.*float32"):
        trainer.predict(_float64_data(), per_device_batch_size=8)


def test_float64_images_into_a_convolution_are_explained() -> None:
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(2 * 4 * 4, 3))
    x = torch.randn(12, 1, 6, 6, dtype=torch.float64)
    trainer = _trainer(model)
    with pytest.raises(RuntimeError, match=r"float64.*float32"):
        trainer.train(TensorDataset(x, torch.zeros(12, dtype=torch.long)), 1)


def test_an_unrelated_runtime_error_of_the_model_is_left_as_it_is() -> None:
    trainer = _trainer(TinyMLP(dim=8))
    x, y = torch.randn(12, 5), torch.zeros(12, dtype=torch.long)  # 5 features, model takes 8
    with pytest.raises(RuntimeError) as info:
        trainer.train(TensorDataset(x, y), num_epochs=1, per_device_batch_size=4)
    assert "float64" not in str(info.value) and info.value.__cause__ is None


def test_a_float64_model_given_float64_inputs_trains() -> None:
    model = TinyMLP().double()
    trainer = _trainer(model)
    trainer.train(_float64_data(), num_epochs=1, per_device_batch_size=8)
    assert trainer.state.global_step == 3


# ------------------------------------------------- another library's callback method names
@pytest.mark.parametrize(
    ("name", "event"),
    [
        ("on_epoch_end", "on_training_run_epoch_end"),  # Keras, Hugging Face
        ("on_train_start", "on_training_run_start"),  # Lightning
        ("on_train_begin", "on_training_run_start"),  # Keras, Hugging Face
        ("on_step_end", "on_optimizer_step_end"),  # Hugging Face: after an update
        ("on_batch_end", "on_train_step_end"),  # Keras
        ("on_train_batch_end", "on_train_step_end"),  # Lightning, Keras
        ("on_validation_end", "on_evaluation_run_end"),  # Lightning
    ],
)
def test_another_librarys_event_name_points_to_the_event_at_the_same_point(
    name: str, event: str
) -> None:
    """By spelling alone on_epoch_end is closest to on_eval_epoch_end (never fired without
    evaluation data) and on_train_start to on_train_step_start (every batch)."""
    from scramjet.callbacks import TrainerCallback

    callback_type = type("Mine", (TrainerCallback,), {name: lambda self, trainer, **kw: None})
    with pytest.raises(ValueError) as info:
        _trainer(TinyMLP()).add_callback(callback_type())
    text = str(info.value)
    assert repr(name) in text and f"'{event}'" in text
    assert "The closest event" not in text


def test_a_misspelt_event_still_gets_the_closest_name() -> None:
    from scramjet.callbacks import TrainerCallback

    class Typo(TrainerCallback):
        def on_train_epoch_ends(self, trainer: Trainer, **kwargs: object) -> None: ...

    with pytest.raises(ValueError, match="closest event is 'on_train_epoch_end'"):
        _trainer(TinyMLP()).add_callback(Typo())


# ------------------------------------------------------------------ samples without targets
def test_samples_without_targets_are_described_with_what_the_batch_holds() -> None:
    x, _ = blobs(n=16).tensors
    trainer = _trainer(TinyMLP())
    with pytest.raises(TypeError) as info:
        trainer.train(TensorDataset(x), num_epochs=1, per_device_batch_size=8)
    text = str(info.value)
    assert "batch of type list (1 item: a tensor (8, 8) float32)" in text
    assert "TensorDataset(inputs, targets)" in text


def test_a_bare_tensor_batch_is_described_with_its_shape() -> None:
    x, _ = blobs(n=16).tensors
    with pytest.raises(TypeError, match=r"of type Tensor \(\(8, 8\) float32\), with no targets"):
        _trainer(TinyMLP()).train(list(x), num_epochs=1, per_device_batch_size=8)


def test_evaluation_data_without_targets_points_to_predict() -> None:
    train = blobs(n=16)
    trainer = _trainer(TinyMLP())
    with pytest.raises(TypeError, match=r"calculate_eval_batch_loss.*trainer\.predict"):
        trainer.train(train, 1, eval_dataset=TensorDataset(train.tensors[0]))


# ----------------------------------------------- classes that need arguments, passed as such
def test_a_scheduler_class_passed_as_create_scheduler_fn_says_to_bind_its_arguments() -> None:
    trainer = _trainer(TinyMLP())
    with pytest.raises(TypeError) as info:
        trainer.train(blobs(n=16), 1, create_scheduler_fn=torch.optim.lr_scheduler.StepLR)
    text = str(info.value)
    assert "StepLR" in text and "step_size" in text  # torch's own complaint, kept
    assert "functools.partial(StepLR, step_size=" in text


def test_a_scheduler_class_that_needs_only_the_optimizer_trains() -> None:
    trainer = _trainer(TinyMLP())
    trainer.train(blobs(n=16), 1, create_scheduler_fn=torch.optim.lr_scheduler.ConstantLR)
    assert isinstance(trainer.scheduler, torch.optim.lr_scheduler.ConstantLR)


def test_a_callback_class_whose_constructor_needs_arguments_says_to_pass_an_instance() -> None:
    from scramjet.callbacks import EarlyStoppingCallback

    class Patient(EarlyStoppingCallback):
        def __init__(self, patience: int) -> None:
            super().__init__(early_stopping_patience=patience)

    model = TinyMLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError) as info:
        Trainer(model, nn.CrossEntropyLoss(), optimizer, callbacks=[Patient])
    text = str(info.value)
    assert "class Patient" in text and "patience" in text and "Patient(...)" in text


def test_a_class_that_is_no_callback_is_refused_without_being_built() -> None:
    built = []

    class NotACallback:
        def __init__(self) -> None:
            built.append(self)

    model = TinyMLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match="NotACallback"):
        Trainer(model, nn.CrossEntropyLoss(), optimizer, callbacks=[NotACallback])  # type: ignore[list-item]
    assert not built


def test_a_partial_scheduler_missing_an_argument_says_which_to_add() -> None:
    from functools import partial

    fn = partial(torch.optim.lr_scheduler.StepLR, gamma=0.5)
    with pytest.raises(TypeError, match=r"add step_size=\.\.\. to the functools\.partial"):
        _trainer(TinyMLP()).train(blobs(n=16), 1, create_scheduler_fn=fn)


# ------------------------------------------------------- nothing that could be trained
def test_a_frozen_model_is_named_as_such_with_its_parameter_count() -> None:
    model = TinyMLP()
    model.requires_grad_(False)
    trainer = _trainer(model)
    with pytest.raises(ValueError) as info:
        trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=8)
    text = str(info.value)
    assert "none of the model's 4 parameters" in text and "requires_grad_(True)" in text


def test_a_loss_cut_from_the_graph_is_named_as_such() -> None:
    def detached(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.tensor(nn.functional.cross_entropy(outputs, targets).item())

    model = TinyMLP()
    trainer = Trainer(model, detached, torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[])
    with pytest.raises(ValueError) as info:
        trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=8)
    text = str(info.value)
    assert "4 parameters" in text and ".item()" in text and "detach" in text


@pytest.mark.parametrize("context", [torch.no_grad, torch.inference_mode])
def test_train_called_with_gradients_disabled_says_so_before_the_first_batch(
    context: type[torch.no_grad],
) -> None:
    trainer = _trainer(TinyMLP())
    with context(), pytest.raises(RuntimeError) as info:
        trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=8)
    text = str(info.value)
    assert context.__name__ in text and "outside" in text
    assert trainer.state.global_step == 0


# ------------------------------------------------------------ a learning rate of zero
def test_a_learning_rate_of_zero_without_a_scheduler_warns_at_the_users_line() -> None:
    model = TinyMLP()
    trainer = Trainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.0), callbacks=[]
    )
    with pytest.warns(
        UserWarning, match=r"learning rate is still 0 after epoch 1.*has not changed the weights"
    ) as record:
        trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=8)
    assert record[0].filename == __file__


def test_a_second_train_after_a_schedule_that_ended_at_zero_warns_with_the_start_rate() -> None:
    def to_zero(optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LRScheduler:
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: max(0.0, 1 - step / 2))

    model = TinyMLP()
    trainer = _trainer(model)
    trainer.train(blobs(n=16), 1, per_device_batch_size=8, create_scheduler_fn=to_zero)
    assert trainer.optimizer.param_groups[0]["lr"] == 0.0
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.warns(UserWarning, match=r"earlier train\(\).*0\.1"):
        trainer.train(blobs(n=16), 1, per_device_batch_size=8)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # as warned


def test_a_nonzero_rate_or_a_schedule_gives_no_warning() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _trainer(TinyMLP()).train(blobs(n=16), 1, per_device_batch_size=8)


def test_a_second_train_continues_the_weights_and_restarts_the_counters() -> None:
    model = TinyMLP()
    trainer = _trainer(model)
    trainer.train(blobs(n=16), 2, per_device_batch_size=8)
    after_first = [p.detach().clone() for p in model.parameters()]
    trainer.train(blobs(n=16), 1, per_device_batch_size=8, reset_run_history=False)
    assert trainer.state.global_step == 2  # this run's updates only
    assert len(trainer.run_history.get_metric_values("train_loss_epoch")) == 3
    assert not all(torch.equal(a, b) for a, b in zip(after_first, model.parameters()))
    trainer.train(blobs(n=16), 1, per_device_batch_size=8)
    assert len(trainer.run_history.get_metric_values("train_loss_epoch")) == 1


def test_rates_set_by_a_callback_from_zero_give_no_warning() -> None:
    import warnings

    from scramjet.callbacks import TrainerCallback

    class WarmupFromZero(TrainerCallback):  # as AIToolbox's scheduler callbacks do
        def on_train_step_start(self, trainer: Trainer, **kwargs: object) -> None:
            for group in trainer.optimizer.param_groups:
                group["lr"] = min(0.1, group["lr"] + 0.05)

    model = TinyMLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    trainer = Trainer(model, nn.CrossEntropyLoss(), optimizer, callbacks=[WarmupFromZero()])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trainer.train(blobs(n=16), 2, per_device_batch_size=8)


def test_an_optimizer_without_learning_rates_is_left_alone() -> None:
    # AIToolbox's own tests train with stand-in optimizers whose groups hold no "lr"
    import warnings
    from types import SimpleNamespace

    from scramjet.trainer.checks import warn_zero_learning_rate

    for groups in ([{"params": []}], [], None):
        optimizer = SimpleNamespace(param_groups=groups)
        trainer = SimpleNamespace(
            run_config=object(), scheduler=None, optimizer=optimizer, state=SimpleNamespace(epoch=0)
        )
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            warn_zero_learning_rate(trainer)
