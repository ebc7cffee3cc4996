"""A Hugging Face batch keyed 'label' (not 'labels'): the error says to rename it."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from scramjet import Trainer


def test_a_label_key_the_model_ignores_is_named_in_the_error() -> None:
    config = BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, num_labels=2,
    )  # fmt: skip
    model = BertForSequenceClassification(config)
    data = [
        {"input_ids": torch.randint(0, 50, (6,)), "label": torch.tensor(i % 2)} for i in range(8)
    ]
    trainer = Trainer(
        model, loss_func=None, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), callbacks=()
    )
    with pytest.raises(TypeError, match="rename 'label' or 'target' to 'labels'"):
        trainer.train(data, num_epochs=1, per_device_batch_size=4)
    renamed = [{"input_ids": d["input_ids"], "labels": d["label"]} for d in data]
    trainer.train(renamed, num_epochs=1, per_device_batch_size=4)  # the advice works
    assert trainer.run_history.get_latest_metric("train_loss_epoch") > 0
