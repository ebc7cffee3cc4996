"""Hugging Face models with the Trainer's default hooks, offline (models built from configs).

- A tiny ``BertForSequenceClassification`` (one layer, hidden size 16) learns whether
  token 5 appears in a sequence from dict batches ``{"input_ids", "attention_mask",
  "labels"}``: the model computes its own loss from ``labels`` and that loss is the one
  trained on (a ``loss_func`` given too is never called). ``predict`` returns a
  ``SequenceClassifierOutput`` whose ``logits`` hold one row per sample in dataset order
  (the rows of calling the model directly; no ``loss``: the labels are left out), and
  ``evaluate`` records ``eval_loss_epoch`` equal to the model's loss over the data.
- A model that returns a dict of logits without a loss trains with ``loss_func`` on
  the batch's ``labels``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import Dataset
from transformers import BertConfig, BertForSequenceClassification
from transformers.modeling_outputs import SequenceClassifierOutput

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback

VOCAB, LENGTH, MARK = 12, 8, 5


def bert(seed: int = 0) -> BertForSequenceClassification:
    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=LENGTH,
        num_labels=2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return BertForSequenceClassification(config)


class MarkedSequences(Dataset[dict[str, torch.Tensor]]):
    """Token sequences (with padding); label 1 when token ``MARK`` appears among the real ones."""

    def __init__(self, n: int, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(6, VOCAB, (n, LENGTH), generator=g)  # never MARK by chance
        lengths = torch.randint(4, LENGTH + 1, (n,), generator=g)
        labels = torch.arange(n) % 2
        for i in range(n):
            if labels[i]:
                ids[i, int(torch.randint(1, int(lengths[i]), (1,), generator=g))] = MARK
        ids[:, 0] = 1  # a [CLS]-like first token
        mask = (torch.arange(LENGTH)[None, :] < lengths[:, None]).long()
        self.input_ids, self.attention_mask = ids * mask, mask
        self.labels = labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {
            "input_ids": self.input_ids[i],
            "attention_mask": self.attention_mask[i],
            "labels": self.labels[i],
        }


class StepLosses(TrainerCallback):
    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.losses.append(float(kwargs["batch_output"]["loss"].detach()))


def never_called(*args: Any) -> torch.Tensor:
    raise AssertionError("the model's own loss is used, not loss_func")


@pytest.fixture(scope="module")
def trained() -> Iterator[tuple[Trainer, StepLosses]]:
    model = bert()
    steps = StepLosses()
    trainer = Trainer(
        model,
        never_called,
        torch.optim.AdamW(model.parameters(), lr=1e-2),
        callbacks=[steps],
        seed=0,
    )
    with pytest.warns(UserWarning, match="returned its own 'loss'"):
        trainer.train(
            MarkedSequences(128), num_epochs=6, per_device_batch_size=16,
            eval_dataset=MarkedSequences(24, seed=1),
        )  # fmt: skip
    yield trainer, steps


def test_bert_learns_with_the_default_hooks(trained: tuple[Trainer, StepLosses]) -> None:
    trainer, steps = trained
    assert len(steps.losses) == 6 * 8
    first, last = sum(steps.losses[:4]) / 4, sum(steps.losses[-4:]) / 4
    assert last < 0.5 * first, steps.losses
    train_losses = trainer.run_history.get_metric_values("train_loss_epoch")
    assert len(train_losses) == 6 and train_losses[-1] < 0.5 * train_losses[0]
    eval_losses = trainer.run_history.get_metric_values("eval_loss_epoch")
    assert len(eval_losses) == 6 and eval_losses[-1] < 0.5 * eval_losses[0]


def test_bert_predict_returns_its_own_output_kind(trained: tuple[Trainer, StepLosses]) -> None:
    trainer, _ = trained
    data = MarkedSequences(27, seed=2)
    predicted = trainer.predict(data, per_device_batch_size=8)  # 8, 8, 8, 3
    assert type(predicted) is SequenceClassifierOutput
    assert predicted.loss is None, "predict leaves the labels out"
    assert predicted.logits.shape == (27, 2)
    model = trainer.unwrapped_model.eval()
    with torch.no_grad():
        direct = model(input_ids=data.input_ids, attention_mask=data.attention_mask).logits
    torch.testing.assert_close(predicted.logits, direct, rtol=1e-4, atol=1e-5)
    accuracy = (predicted.logits.argmax(1) == data.labels).float().mean()
    assert accuracy >= 0.9


def test_bert_evaluate_records_the_models_loss(trained: tuple[Trainer, StepLosses]) -> None:
    trainer, _ = trained
    data = MarkedSequences(20, seed=3)
    trainer.evaluate(data, per_device_batch_size=8)  # 8, 8, 4: a per-sample mean
    model = trainer.unwrapped_model.eval()
    with torch.no_grad():
        out = model(
            input_ids=data.input_ids, attention_mask=data.attention_mask, labels=data.labels
        )
    got = trainer.run_history.get_latest_metric("eval_loss_epoch")
    assert got == pytest.approx(float(out.loss), rel=1e-4)


class BertLogits(nn.Module):
    """Returns ``{"logits": ...}`` and no loss; ``labels`` is not a forward argument."""

    def __init__(self) -> None:
        super().__init__()
        self.bert = bert(seed=1)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> dict[str, Any]:
        return {"logits": self.bert(input_ids=input_ids, attention_mask=attention_mask).logits}


def test_dict_output_without_loss_uses_loss_func_on_labels() -> None:
    model = BertLogits()
    calls: list[torch.Tensor] = []

    def loss_func(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        calls.append(targets)
        return nn.functional.cross_entropy(logits, targets)

    steps = StepLosses()
    trainer = Trainer(
        model, loss_func, torch.optim.AdamW(model.parameters(), lr=1e-2),
        callbacks=[steps], seed=0,
    )  # fmt: skip
    data = MarkedSequences(128)
    trainer.train(
        data, num_epochs=6, per_device_batch_size=16, train_dataloader_kwargs={"shuffle": False}
    )
    assert len(calls) == 6 * 8
    torch.testing.assert_close(calls[0], data.labels[:16])  # the batch's labels
    first, last = sum(steps.losses[:4]) / 4, sum(steps.losses[-4:]) / 4
    assert last < 0.5 * first, steps.losses
    predicted = trainer.predict(data, per_device_batch_size=16)
    assert list(predicted) == ["logits"] and predicted["logits"].shape == (128, 2)
