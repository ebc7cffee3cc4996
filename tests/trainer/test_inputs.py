"""The Trainer takes what users bring: every entry point x input x batch x output kind.

The matrix (every cell is one parametrised case of ``test_matrix``)::

    entry point   train | evaluate | predict
    input kind    map-style Dataset | list of samples | IterableDataset |
                  generator of batches | ready DataLoader
    batch kind    (inputs, targets) tuple | dict {"x": ..., "labels": ...}
    output kind   tensor | dict | dataclass | transformers ModelOutput | tuple | namedtuple

All cells run the default hooks (no override) on a tiny separable task: 30 samples of
4 features, label ``x0 + x1 > 0``, batches of 8 (the last one holds 6). The model's
forward takes ``x`` only, so the ``labels`` of a dict batch must be left out of the call;
the dict, dataclass and namedtuple outputs put ``hidden`` before ``logits``, so the
logits must be found by name, not position.

What each cell checks (values, not only "no crash"):

- train: the step losses fall (the last four average under 60 % of the first four), the
  trained model classifies the data, and ``train_loss_epoch`` is recorded once per epoch.
  A generator is read once, so it carries four passes over the data in its one epoch; the
  other inputs run four epochs.
- evaluate: ``eval_loss_epoch`` equals the cross-entropy of the model's logits over all
  30 samples computed directly (a per-sample mean: the short last batch weighs less).
- predict: the result equals ``model(x)`` computed directly on all samples: the same
  type, the same fields, the rows in dataset order.

Beyond the matrix: a torchmetrics metric computed in a callback over evaluation steps
matches the accuracy of ``predict``; a model whose forward takes ``**kwargs`` receives
the targets too; a model wrapped in ``torch.compile`` or ``DataParallel`` (whose forward
takes anything, like DDP's) gets the keys its own forward takes; bad inputs give errors that say what was received and how to fix it;
``scheduler_step`` runs only with a scheduler; the ``training_run_epoch_end`` hook runs
once per epoch, before its event.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, IterableDataset
from torchmetrics.classification import MulticlassAccuracy
from transformers.utils import ModelOutput

from scramjet import Trainer
from scramjet.accel import accelerate_model
from scramjet.callbacks import EarlyStoppingCallback, TrainerCallback
from scramjet.callbacks.base import CallbackError
from scramjet.trainer import MetricNotFoundError

N, DIM, HIDDEN, BS, EPOCHS = 30, 4, 8, 8, 4
STEPS_PER_EPOCH = 4  # ceil(30 / 8)

ENTRY_POINTS = ["train", "evaluate", "predict"]
INPUT_KINDS = ["dataset", "list", "iterable", "generator", "dataloader"]
BATCH_KINDS = ["tuple", "dict"]
OUTPUT_KINDS = ["tensor", "dict", "dataclass", "model_output", "tuple", "namedtuple"]


# ----------------------------------------------------------------------------- data
def task(n: int = N, seed: int = 0, flip: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, y)`` with ``y = x0 + x1 > 0``; ``flip`` of the labels inverted (label noise)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, DIM, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).long()
    flipped = torch.rand(n, generator=g) < flip
    return x, torch.where(flipped, 1 - y, y)


def samples(x: torch.Tensor, y: torch.Tensor, batch_kind: str) -> list[Any]:
    if batch_kind == "tuple":
        return [(x[i], y[i]) for i in range(len(y))]
    return [{"x": x[i], "labels": y[i]} for i in range(len(y))]


class MapData(Dataset[Any]):
    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> Any:
        return self.items[i]


class StreamData(IterableDataset[Any]):
    """Yields the samples in order; no ``__len__``."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def __iter__(self) -> Iterator[Any]:
        return iter(self.items)


def batch_stream(
    x: torch.Tensor, y: torch.Tensor, batch_kind: str, passes: int = 1
) -> Iterator[Any]:
    """A generator of ready batches, ``passes`` times over the data."""
    for _ in range(passes):
        for i in range(0, len(y), BS):
            xb, yb = x[i : i + BS], y[i : i + BS]
            yield (xb, yb) if batch_kind == "tuple" else {"x": xb, "labels": yb}


def make_input(
    kind: str, batch_kind: str, x: torch.Tensor, y: torch.Tensor, passes: int = 1
) -> Any:
    items = samples(x, y, batch_kind)
    if kind == "dataset":
        return MapData(items)
    if kind == "list":
        return items
    if kind == "iterable":
        return StreamData(items)
    if kind == "generator":
        return batch_stream(x, y, batch_kind, passes)
    assert kind == "dataloader"
    return DataLoader(MapData(items), batch_size=BS, shuffle=False)


# ----------------------------------------------------------------------------- models
@dataclasses.dataclass
class PlainOutput:
    hidden: torch.Tensor
    logits: torch.Tensor


@dataclasses.dataclass
class HFStyleOutput(ModelOutput):  # type: ignore[misc]
    hidden: torch.Tensor | None = None
    logits: torch.Tensor | None = None


NamedOutput = collections.namedtuple("NamedOutput", ["hidden", "logits"])


class Net(nn.Module):
    """``x -> tanh(body(x)) -> head``, returning its logits in the requested kind."""

    def __init__(self, kind: str = "tensor", seed: int = 0) -> None:
        super().__init__()
        self.kind = kind
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.body = nn.Linear(DIM, HIDDEN)
            self.head = nn.Linear(HIDDEN, 2)

    def forward(self, x: torch.Tensor) -> Any:
        hidden = torch.tanh(self.body(x))
        logits = self.head(hidden)
        if self.kind == "tensor":
            return logits
        if self.kind == "dict":
            return {"hidden": hidden, "logits": logits}
        if self.kind == "dataclass":
            return PlainOutput(hidden=hidden, logits=logits)
        if self.kind == "model_output":
            return HFStyleOutput(hidden=hidden, logits=logits)
        if self.kind == "tuple":
            return (logits, hidden)
        assert self.kind == "namedtuple"
        return NamedOutput(hidden, logits)


def logits_in(output: Any, kind: str) -> torch.Tensor:
    """The logits of ``Net(kind)``'s output, by construction (not by the library's rules)."""
    if kind == "tensor":
        return output
    if kind == "dict":
        return output["logits"]
    if kind == "tuple":
        return output[0]
    return output.logits


def direct_output(model: nn.Module, x: torch.Tensor) -> Any:
    was_training = model.training
    model.eval()
    with torch.no_grad():
        out = model(x)
    model.train(was_training)
    return out


def assert_same_output(actual: Any, expected: Any) -> None:
    """Same type, same fields, equal values (recursively)."""
    assert type(actual) is type(expected), (type(actual), type(expected))
    if isinstance(expected, torch.Tensor):
        assert actual.shape == expected.shape
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)
    elif dataclasses.is_dataclass(expected):
        names = [f.name for f in dataclasses.fields(expected)]
        assert [f.name for f in dataclasses.fields(actual)] == names
        for name in names:
            assert_same_output(getattr(actual, name), getattr(expected, name))
        if isinstance(expected, Mapping):
            assert list(actual.keys()) == list(expected.keys())
    elif isinstance(expected, Mapping):
        assert list(actual.keys()) == list(expected.keys())
        for key in expected:
            assert_same_output(actual[key], expected[key])
    elif isinstance(expected, tuple):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same_output(a, e)
    else:
        assert actual == expected


class StepLosses(TrainerCallback):
    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.losses.append(float(kwargs["batch_output"]["loss"].detach()))


def make_trainer(
    model: nn.Module,
    callbacks: list[Any] | None = None,
    lr: float = 0.5,
    trainer_cls: type[Trainer] = Trainer,
    loss_func: Any = "default",
) -> Trainer:
    return trainer_cls(
        model,
        nn.CrossEntropyLoss() if loss_func == "default" else loss_func,
        torch.optim.SGD(model.parameters(), lr=lr),
        callbacks=callbacks or [],
        seed=0,
    )


# ----------------------------------------------------------------------------- the matrix
@pytest.mark.parametrize("output_kind", OUTPUT_KINDS)
@pytest.mark.parametrize("batch_kind", BATCH_KINDS)
@pytest.mark.parametrize("input_kind", INPUT_KINDS)
@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_matrix(entry: str, input_kind: str, batch_kind: str, output_kind: str) -> None:
    x, y = task()
    model = Net(output_kind)
    if entry == "train":
        steps = StepLosses()
        trainer = make_trainer(model, [steps])
        if input_kind == "generator":  # read once: one epoch holding every pass
            data = make_input(input_kind, batch_kind, x, y, passes=EPOCHS)
            trainer.train(data, num_epochs=1, per_device_batch_size=BS)
            epochs = 1
        else:
            data = make_input(input_kind, batch_kind, x, y)
            trainer.train(data, num_epochs=EPOCHS, per_device_batch_size=BS)
            epochs = EPOCHS
        losses = steps.losses
        assert len(losses) == EPOCHS * STEPS_PER_EPOCH
        first, last = sum(losses[:4]) / 4, sum(losses[-4:]) / 4
        assert last < 0.6 * first, losses
        accuracy = (logits_in(direct_output(model, x), output_kind).argmax(1) == y).float().mean()
        assert accuracy >= 0.9
        recorded = trainer.run_history.get_metric_values("train_loss_epoch")
        assert len(recorded) == epochs and recorded[-1] < 0.6 * losses[0]
        assert trainer.state.global_step == EPOCHS * STEPS_PER_EPOCH
    elif entry == "evaluate":
        trainer = make_trainer(model)
        trainer.evaluate(make_input(input_kind, batch_kind, x, y), per_device_batch_size=BS)
        logits = logits_in(direct_output(model, x), output_kind)
        expected = float(nn.functional.cross_entropy(logits, y))
        got = trainer.run_history.get_latest_metric("eval_loss_epoch")
        assert got == pytest.approx(expected, rel=1e-5)
        assert trainer.run_history.get_metric_values("eval_loss_epoch") == [got]
    else:
        trainer = make_trainer(model)
        predicted = trainer.predict(
            make_input(input_kind, batch_kind, x, y), per_device_batch_size=BS
        )
        assert_same_output(predicted, direct_output(model, x))
        assert len(logits_in(predicted, output_kind)) == N


# ----------------------------------------------------------------------------- beyond
def test_forward_with_kwargs_receives_the_targets_too() -> None:
    """A forward taking ``**kwargs`` gets every key (it may compute its own loss)."""
    seen: list[set[str]] = []

    class OwnLoss(Net):
        def forward(self, x: torch.Tensor, **kwargs: Any) -> Any:
            seen.append(set(kwargs))
            logits = self.head(torch.tanh(self.body(x)))
            labels = kwargs.get("labels")
            loss = None if labels is None else nn.functional.cross_entropy(logits, labels)
            return {"loss": loss, "logits": logits}

    def never(*args: Any) -> torch.Tensor:
        raise AssertionError("the output's own loss is used, not loss_func")

    x, y = task()
    model = OwnLoss()
    trainer = make_trainer(model, loss_func=never)
    with pytest.warns(UserWarning, match="returned its own 'loss'"):
        trainer.train(MapData(samples(x, y, "dict")), num_epochs=1, per_device_batch_size=BS)
    assert seen and all(keys == {"labels"} for keys in seen)
    seen.clear()
    predicted = trainer.predict(MapData(samples(x, y, "dict")), per_device_batch_size=BS)
    assert seen and all(keys == set() for keys in seen), "predict leaves the targets out"
    assert predicted["loss"] is None
    torch.testing.assert_close(predicted["logits"], direct_output(model, x)["logits"])


@pytest.mark.parametrize("wrapper", ["compile", "data_parallel", "accelerate_model"])
def test_wrapped_model_with_dict_batches(wrapper: str) -> None:
    """A wrapper's forward takes ``*args, **kwargs`` (DataParallel, like DDP, and
    ``accelerate_model(instance)``) or is set on the instance (``torch.compile``): the keys
    are chosen by the wrapped model's forward."""
    x, y = task()
    net = Net("dict")
    model: Any
    if wrapper == "compile":
        model = torch.compile(net, backend="eager")
    elif wrapper == "data_parallel":
        model = nn.DataParallel(net)
    else:
        model = accelerate_model(net, backends=["PYTORCH"])
    steps = StepLosses()
    trainer = make_trainer(model, [steps])
    data = MapData(samples(x, y, "dict"))
    trainer.train(data, num_epochs=EPOCHS, per_device_batch_size=BS)
    assert sum(steps.losses[-4:]) < 0.6 * sum(steps.losses[:4])
    assert_same_output(trainer.predict(data, per_device_batch_size=BS), direct_output(net, x))


class EvalAccuracy(TrainerCallback):
    """Accuracy over the evaluation steps with torchmetrics, recorded in the run history."""

    def __init__(self) -> None:
        self.metric = MulticlassAccuracy(num_classes=2, average="micro")

    def on_eval_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        self.metric.reset()

    def on_eval_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        logits = kwargs["batch_output"]["model_outputs"]["logits"]
        self.metric.update(logits, kwargs["batch"]["labels"])

    def on_eval_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        trainer.run_history.update_metric("eval_accuracy", self.metric.compute())


def test_torchmetrics_callback_matches_predict() -> None:
    x, y = task()
    x_eval, y_eval = task(n=37, seed=1, flip=0.2)  # noisy labels: accuracy well below 1
    model = Net("dict")
    trainer = make_trainer(model, [EvalAccuracy()], lr=0.2)
    eval_data = MapData(samples(x_eval, y_eval, "dict"))
    trainer.train(
        MapData(samples(x, y, "dict")), num_epochs=2, per_device_batch_size=BS,
        eval_dataset=eval_data,
    )  # fmt: skip
    history = trainer.run_history
    assert len(history.get_metric_values("eval_accuracy")) == 2
    predicted = trainer.predict(eval_data, per_device_batch_size=5)
    by_hand = float((predicted["logits"].argmax(1) == y_eval).float().mean())
    assert history.get_latest_metric("eval_accuracy") == pytest.approx(by_hand, abs=1e-6)
    trainer.evaluate(eval_data, per_device_batch_size=4)  # other batch boundaries, same value
    assert history.get_latest_metric("eval_accuracy") == pytest.approx(by_hand, abs=1e-6)
    assert 0.5 < by_hand < 1.0


# ----------------------------------------------------------------------------- bad input
def test_generator_with_several_epochs_is_refused() -> None:
    x, y = task()
    trainer = make_trainer(Net())
    with pytest.raises(ValueError) as info:
        trainer.train(batch_stream(x, y, "tuple"), num_epochs=2, per_device_batch_size=BS)
    message = str(info.value)
    assert "train_dataset is a generator" in message
    assert "num_epochs=2" in message and "Pass num_epochs=1" in message
    assert "IterableDataset" in message  # what to pass instead
    assert trainer.state.global_step == 0
    with pytest.raises(ValueError, match="eval_dataset is a generator, which can be read only"):
        trainer.train(
            make_input("dataset", "tuple", x, y), num_epochs=3,
            eval_dataset=batch_stream(x, y, "tuple"),
        )  # fmt: skip


def test_dict_batch_without_targets_and_model_without_loss() -> None:
    x, _ = task()
    items = [{"x": x[i]} for i in range(N)]
    with pytest.raises(TypeError) as info:
        make_trainer(Net()).train(MapData(items), num_epochs=1, per_device_batch_size=BS)
    message = str(info.value)
    assert message.startswith("calculate_train_batch_loss: the dict batch has no targets")
    assert "'labels', 'label', 'targets', 'target', 'y'" in message  # where it looked
    assert (
        "Name the targets 'labels'" in message and "override calculate_train_batch_loss" in message
    )


def test_model_output_without_logits() -> None:
    class HiddenOnly(Net):
        def forward(self, x: torch.Tensor) -> Any:
            return {"hidden": torch.tanh(self.body(x))}

    x, y = task()
    trainer = make_trainer(HiddenOnly())
    with pytest.raises(TypeError) as info:
        trainer.evaluate(MapData(samples(x, y, "dict")), per_device_batch_size=BS)
    message = str(info.value)
    assert message.startswith(
        "calculate_eval_batch_loss: the model returned a dict with no 'logits'"
    )
    assert "(fields: hidden)" in message and "no 'loss'" in message
    assert "override calculate_eval_batch_loss" in message


def test_batch_that_is_neither_a_tuple_nor_a_dict() -> None:
    x, _ = task()
    trainer = make_trainer(Net())
    with pytest.raises(TypeError) as info:
        trainer.train([x[i] for i in range(N)], num_epochs=1, per_device_batch_size=BS)
    message = str(info.value)
    assert "calculate_train_batch_loss received a batch of type Tensor" in message
    assert "override calculate_train_batch_loss" in message


def test_dataloader_with_dataloader_kwargs_or_collate_fn() -> None:
    x, y = task()
    loader = make_input("dataloader", "tuple", x, y)
    trainer = make_trainer(Net())
    with pytest.raises(ValueError) as info:
        trainer.train(
            loader, num_epochs=1, per_device_batch_size=BS,
            train_dataloader_kwargs={"shuffle": True, "num_workers": 2},
        )  # fmt: skip
    message = str(info.value)
    assert message.startswith("train_dataset is a DataLoader that already yields batches")
    assert "['num_workers', 'shuffle']" in message  # what was received
    assert "Set them on your DataLoader, or pass the dataset itself" in message
    with pytest.raises(ValueError, match=r"\['collate_fn'\]"):
        trainer.evaluate(loader, collate_fn=lambda b: b)
    with pytest.raises(ValueError, match="the evaluation data is a DataLoader"):
        trainer.train(
            make_input("dataset", "tuple", x, y), num_epochs=1, eval_dataset=loader,
            eval_dataloader_kwargs={"num_workers": 0},
        )  # fmt: skip


def test_unknown_metric_is_both_a_key_error_and_a_value_error() -> None:
    x, y = task()
    trainer = make_trainer(Net())
    trainer.train(make_input("dataset", "tuple", x, y), num_epochs=1, per_device_batch_size=BS)
    history = trainer.run_history
    with pytest.raises(KeyError):
        history.get_latest_metric("nope")
    with pytest.raises(ValueError) as info:
        history.get_latest_metric("nope")
    assert isinstance(info.value, MetricNotFoundError)
    assert str(info.value) == (
        "No values recorded for metric 'nope'; recorded metrics: ['train_loss_epoch']."
    )


def test_a_misspelt_metric_name_is_answered_with_the_closest_recorded_one() -> None:
    x, y = task()
    trainer = make_trainer(Net(), callbacks=[EarlyStoppingCallback(watch_metric="eval_los_epoch")])
    with pytest.raises(CallbackError) as info:
        trainer.train(
            make_input("dataset", "tuple", x, y),
            eval_dataset=make_input("dataset", "tuple", x, y),
            num_epochs=2,
            per_device_batch_size=BS,
        )
    assert str(info.value).endswith(
        "No values recorded for metric 'eval_los_epoch'; recorded metrics: "
        "['eval_loss_epoch', 'train_loss_epoch']. Did you mean 'eval_loss_epoch'?"
    )
    with pytest.raises(MetricNotFoundError) as far:  # nothing close: no guess
        trainer.run_history.get_latest_metric("accuracy")
    assert "Did you mean" not in str(far.value)


class CountingSchedulerStep(Trainer):
    calls = 0

    def scheduler_step(self) -> None:
        type(self).calls += 1
        super().scheduler_step()


def test_scheduler_step_runs_only_with_a_scheduler() -> None:
    x, y = task()
    data = make_input("dataset", "tuple", x, y)
    trainer = make_trainer(Net(), trainer_cls=CountingSchedulerStep)
    CountingSchedulerStep.calls = 0
    trainer.train(data, num_epochs=2, per_device_batch_size=BS)
    assert trainer.state.global_step == 8 and CountingSchedulerStep.calls == 0
    trainer.train(
        data, num_epochs=2, per_device_batch_size=BS,
        create_scheduler_fn=lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=1),
    )  # fmt: skip
    assert CountingSchedulerStep.calls == 8, "once per optimizer update with a scheduler"


def test_training_run_epoch_end_hook_runs_before_its_event() -> None:
    log: list[str] = []

    class Hooked(Trainer):
        def training_run_epoch_end(self) -> None:
            log.append(f"hook {self.state.epoch}")

    class Listener(TrainerCallback):
        def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
            log.append(f"event {trainer.state.epoch}")

    x, y = task()
    trainer = make_trainer(Net(), [Listener()], trainer_cls=Hooked)
    data = make_input("dataset", "tuple", x, y)
    trainer.train(data, num_epochs=3, per_device_batch_size=BS, eval_dataset=data)
    assert log == ["hook 0", "event 0", "hook 1", "event 1", "hook 2", "event 2"]
