"""A practitioner's own training setup on the Trainer: overridden hooks, unusual model
outputs and batches, result packages on what ``predict`` returns, checked against
plain PyTorch."""

from __future__ import annotations

import math
import re

import pytest
import torch
from torch import nn

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback
from scramjet.metrics import (
    BinaryResults,
    ClassificationResults,
    PerplexityResults,
    RegressionResults,
)


# ---------------------------------------------------------------- token-level metrics
class _Tagger(nn.Module):
    """Tags every token of a sequence with one of four classes."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 8)
        self.out = nn.Linear(8, 4)

    def forward(self, input_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"logits": self.out(self.embed(input_ids))}


def _pad_collate(batch: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    longest = max(len(s["input_ids"]) for s in batch)
    ids = torch.zeros(len(batch), longest, dtype=torch.long)
    labels = torch.full((len(batch), longest), -100)
    for i, sample in enumerate(batch):
        ids[i, : len(sample["input_ids"])] = sample["input_ids"]
        labels[i, : len(sample["labels"])] = sample["labels"]
    return {"input_ids": ids, "labels": labels}


def _token_setup() -> tuple[Trainer, list[dict[str, torch.Tensor]]]:
    torch.manual_seed(0)
    data = [
        {"input_ids": torch.randint(0, 10, (n,)), "labels": torch.randint(0, 4, (n,))}
        for n in (3, 5, 4, 6, 2, 5)
    ]
    model = _Tagger()

    def token_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())

    trainer = Trainer(model, token_loss, torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[])
    trainer.train(data, num_epochs=1, per_device_batch_size=2, collate_fn=_pad_collate)
    return trainer, data


def test_classification_results_skip_padded_token_targets() -> None:
    trainer, data = _token_setup()
    out = ClassificationResults(num_classes=4).evaluate(
        trainer, data, per_device_batch_size=2, collate_fn=_pad_collate
    )
    model = trainer.unwrapped_model
    with torch.no_grad():
        preds = torch.cat([model(s["input_ids"])["logits"].argmax(-1) for s in data])
    labels = torch.cat([s["labels"] for s in data])
    assert out["accuracy"] == pytest.approx(float((preds == labels).float().mean()), abs=1e-6)
    assert sum(map(sum, out["confusion_matrix"])) == labels.numel()


def test_perplexity_results_skip_padded_token_targets_by_default() -> None:
    trainer, data = _token_setup()
    out = PerplexityResults().evaluate(
        trainer, data, per_device_batch_size=2, collate_fn=_pad_collate
    )
    model = trainer.unwrapped_model
    with torch.no_grad():
        logits = torch.cat([model(s["input_ids"])["logits"] for s in data])
    labels = torch.cat([s["labels"] for s in data])
    expected = math.exp(float(nn.functional.cross_entropy(logits, labels)))
    assert out["perplexity"] == pytest.approx(expected, rel=1e-5)


def test_perplexity_results_name_targets_out_of_range() -> None:
    logits, target = torch.randn(2, 3, 5), torch.tensor([[1, 2, -1], [1, 2, 3]])
    with pytest.raises(ValueError, match=r"-1.*ignore_index"):
        PerplexityResults()(logits, target)


# ---------------------------------------------------------------- shapes of scores
def test_classification_results_read_one_logit_per_sample_as_binary() -> None:
    torch.manual_seed(0)
    logits, labels = torch.randn(20, 1), torch.randint(0, 2, (20,))
    out = ClassificationResults()(logits, labels)
    expected = float(((logits[:, 0] > 0).long() == labels).float().mean())
    assert out["accuracy"] == pytest.approx(expected)
    assert out["accuracy"] != pytest.approx(float((labels == 0).float().mean()))


def test_classification_results_threshold_probabilities_instead_of_truncating() -> None:
    probabilities, labels = torch.tensor([0.9, 0.2, 0.7, 0.6]), torch.tensor([1, 0, 1, 0])
    out = (ClassificationResults() + BinaryResults())(probabilities, labels)
    assert out["confusion_matrix"] == [[1, 1], [0, 2]]
    assert out["accuracy"] == pytest.approx(0.75)


def test_binary_results_take_two_class_logits() -> None:
    torch.manual_seed(0)
    logits, labels = torch.randn(50, 2), torch.randint(0, 2, (50,))
    expected = BinaryResults()(logits.softmax(-1)[:, 1], labels)
    assert BinaryResults()(logits, labels) == pytest.approx(expected)


def test_regression_results_name_the_shapes_that_differ() -> None:
    with pytest.raises(ValueError, match=r"\(20, 2\).*\(20,\)"):
        RegressionResults()(torch.randn(20, 2), torch.randn(20))


# ---------------------------------------------------------------- dict batches
def _dict_batches(n: int = 16) -> list[dict[str, object]]:
    torch.manual_seed(0)
    return [
        {"features": torch.randn(4), "y": torch.tensor(i % 3), "id": f"sample-{i}"}
        for i in range(n)
    ]


def test_dict_batch_whose_keys_miss_forward_says_which_keys_and_how_to_fix() -> None:
    model = nn.Linear(4, 3)  # forward(input): no batch key is named "input"
    trainer = Trainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[]
    )
    with pytest.raises(TypeError) as info:
        trainer.train(_dict_batches(), num_epochs=1, per_device_batch_size=4)
    message = str(info.value)
    for part in ("'input'", "'features'", "'id'", "calculate_train_batch_loss"):
        assert part in message, message


def test_prediction_passes_target_keys_the_forward_requires() -> None:
    class NeedsLabels(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(4, 3)

        def forward(self, features: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
            logits = self.layer(features)
            return {"loss": nn.functional.cross_entropy(logits, y), "logits": logits}

    model = NeedsLabels()
    trainer = Trainer(model, None, torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[])
    trainer.train(_dict_batches(), num_epochs=1, per_device_batch_size=4)
    data = _dict_batches()
    out = trainer.predict(data, per_device_batch_size=5)
    features = torch.stack([s["features"] for s in data])  # type: ignore[misc]
    with torch.no_grad():
        assert torch.allclose(out["logits"], model.layer(features))


# ---------------------------------------------------------------- batch sizes
def test_per_image_target_dicts_count_images_not_boxes() -> None:
    """Detection-style batches: an image tensor and one dict of boxes per image."""
    torch.manual_seed(0)
    data = [
        (torch.randn(4), {"boxes": torch.randn(k, 4), "labels": torch.randint(0, 3, (k,))})
        for k in (3, 1, 2, 5, 4, 2, 3, 1)
    ]

    def collate(batch: list[tuple[torch.Tensor, dict[str, torch.Tensor]]]) -> tuple[object, ...]:
        return torch.stack([s[0] for s in batch]), [s[1] for s in batch]

    def criterion(out: torch.Tensor, targets: list[dict[str, torch.Tensor]]) -> torch.Tensor:
        per_image = [((o - t["boxes"].mean(0)) ** 2).mean() for o, t in zip(out, targets)]
        return torch.stack(per_image).mean()

    model = nn.Linear(4, 4)
    trainer = Trainer(model, criterion, torch.optim.SGD(model.parameters(), lr=0.0), callbacks=[])
    trainer.train(data, num_epochs=1, per_device_batch_size=3, collate_fn=collate)
    with torch.no_grad():
        expected = sum(float(criterion(model(x[None]), [t])) for x, t in data) / len(data)
    assert trainer.state.samples_seen == len(data)
    assert trainer.run_history.get_latest_metric("train_loss_epoch") == pytest.approx(expected)
    trainer.evaluate(data, per_device_batch_size=3)
    assert trainer.run_history.get_latest_metric("eval_loss_epoch") == pytest.approx(expected)


# ---------------------------------------------------------------- what a loss hook returns
class _ReturnsBatchSize(Trainer):
    """A loss hook whose ``batch_size`` is whatever the test puts in ``size``."""

    size: object = None

    def calculate_train_batch_loss(self, batch: tuple[torch.Tensor, ...]) -> dict[str, object]:
        inputs, targets = batch
        outputs = self.model(inputs)
        loss = nn.functional.cross_entropy(outputs, targets)
        return {"loss": loss, "model_outputs": outputs, "batch_size": self.size}


def _blobs(n: int = 16) -> list[tuple[torch.Tensor, torch.Tensor]]:
    torch.manual_seed(0)
    return list(zip(torch.randn(n, 4), torch.randint(0, 3, (n,))))


@pytest.mark.parametrize(
    ("size", "shown"),
    [(None, "None"), ("8", "'8'"), ([8], "[8]"), (torch.tensor(8), "tensor(8)"), (-1, "-1")],
)
def test_a_batch_size_that_is_no_count_says_what_was_returned(size: object, shown: str) -> None:
    model = nn.Linear(4, 3)
    trainer = _ReturnsBatchSize(model, None, torch.optim.SGD(model.parameters(), lr=0.1), [])
    trainer.size = size
    with pytest.raises((TypeError, ValueError), match=r"'batch_size' " + re.escape(shown)):
        trainer.train(_blobs(), num_epochs=1, per_device_batch_size=8)
    assert trainer.state.samples_seen == 0


def test_a_loss_dict_without_batch_size_names_its_keys() -> None:
    class NoSize(Trainer):
        def calculate_train_batch_loss(self, batch: tuple[torch.Tensor, ...]) -> dict[str, object]:
            outputs = self.model(batch[0])
            return {"loss": nn.functional.cross_entropy(outputs, batch[1]), "outputs": outputs}

    model = nn.Linear(4, 3)
    trainer = NoSize(model, None, torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[])
    with pytest.raises(TypeError, match=r"'loss', 'outputs'.*len\(targets\)"):
        trainer.train(_blobs(), num_epochs=1, per_device_batch_size=8)


def test_result_package_on_a_dataloader_says_to_pass_the_dataset_or_targets() -> None:
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    data = TensorDataset(torch.randn(12, 4), torch.randint(0, 3, (12,)))
    model = nn.Linear(4, 3)
    trainer = Trainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[]
    )
    loader = DataLoader(data, batch_size=4)
    with pytest.raises(TypeError, match=r"DataLoader.*targets="):
        ClassificationResults(3).evaluate(trainer, loader)
    given = ClassificationResults(3).evaluate(trainer, loader, targets=data.tensors[1])
    assert given == ClassificationResults(3).evaluate(trainer, data)


# ---------------------------------------------------------------- train / eval modes
class _FrozenNormNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(4)
        self.head = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(x))


class _KeepsNormFrozen(Trainer):
    """Fine-tuning with frozen BatchNorm statistics: the norm stays in eval mode."""

    def train_epoch_start(self) -> None:
        super().train_epoch_start()
        self.unwrapped_model.norm.eval()


class _NormModes(TrainerCallback):
    """Records the norm's mode at every training step; runs ``action`` after update 1."""

    def __init__(self, action: str) -> None:
        self.action, self.modes = action, []

    def on_train_step_start(self, trainer: Trainer, **kwargs: object) -> None:
        self.modes.append(trainer.unwrapped_model.norm.training)

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: object) -> None:
        if trainer.state.global_step == 1:
            if self.action == "evaluate":
                trainer.run_evaluation()
            else:
                trainer.predict(_blobs(4))


@pytest.mark.parametrize("action", ["evaluate", "predict"])
def test_mid_epoch_evaluation_keeps_a_frozen_submodule_in_eval_mode(action: str) -> None:
    model = _FrozenNormNet()
    modes = _NormModes(action)
    trainer = _KeepsNormFrozen(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), [modes]
    )
    statistics = model.norm.running_mean.clone()
    trainer.train(_blobs(32), num_epochs=1, eval_dataset=_blobs(8), per_device_batch_size=8)
    assert modes.modes == [False, False, False, False]
    assert torch.equal(model.norm.running_mean, statistics)
