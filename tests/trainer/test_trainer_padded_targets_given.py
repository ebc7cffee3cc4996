"""Token-level targets given to a result package's ``evaluate(targets=...)`` unpadded,
while the collate function pads every batch to a multiple of 8: the error names both
shapes, the padding as the cause, and the fix (leave targets= out)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from scramjet import Trainer
from scramjet.metrics import ClassificationResults

VOCAB, CLASSES = 20, 3


class _Tagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, CLASSES)

    def forward(self, input_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"logits": self.embed(input_ids)}


def _pad_to_multiple_of_8(samples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    length = -(-max(len(s["input_ids"]) for s in samples) // 8) * 8
    ids = torch.zeros(len(samples), length, dtype=torch.long)
    labels = torch.full((len(samples), length), -100)
    for i, sample in enumerate(samples):
        n = len(sample["input_ids"])
        ids[i, :n] = torch.tensor(sample["input_ids"])
        labels[i, :n] = torch.tensor(sample["labels"])
    return {"input_ids": ids, "labels": labels}


def _token_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(logits.transpose(1, 2), labels)


def _trained() -> tuple[Trainer, list[dict[str, Any]]]:
    data = [
        {"input_ids": list(range(1, 3 + i % 4)), "labels": [j % CLASSES for j in range(2 + i % 4)]}
        for i in range(10)
    ]
    torch.manual_seed(0)
    model = _Tagger()
    trainer = Trainer(model, loss_func=_token_loss, optimizer=torch.optim.SGD(model.parameters()))
    trainer.train(data, num_epochs=1, per_device_batch_size=4, collate_fn=_pad_to_multiple_of_8)
    return trainer, data


def test_unpadded_targets_error_names_the_padding_and_the_fix() -> None:
    trainer, data = _trained()
    targets = [sample["labels"] for sample in data]  # longest: 5 tokens; batches: 8
    with pytest.raises(ValueError) as caught:
        ClassificationResults().evaluate(trainer, data, targets=targets)
    message = str(caught.value)
    assert "(10, 8, 3)" in message and "(10, 5)" in message
    assert "pad_to_multiple_of" in message
    assert "Leave targets= out" in message


def test_the_fix_scores_each_token_once() -> None:
    trainer, data = _trained()
    result = ClassificationResults().evaluate(trainer, data)
    logits = trainer.predict(data)["logits"]
    predicted = [logits[i, : len(s["labels"])].argmax(-1) for i, s in enumerate(data)]
    right = sum(int((p == torch.tensor(s["labels"])).sum()) for p, s in zip(predicted, data))
    assert result["accuracy"] == pytest.approx(right / sum(len(s["labels"]) for s in data))
