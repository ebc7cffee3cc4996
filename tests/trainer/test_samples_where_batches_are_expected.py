"""Mistakes a practitioner makes with data that looks right, and the errors that name them.

- ``zip(X, Y)`` (an iterator of samples) where a list was meant: an iterator is read as
  ready batches, so each step trained on one unbatched sample, ``per_device_batch_size``
  was ignored and ``samples_seen`` counted the feature dimension. Now refused at the first
  item, whose target is one value, with the fix.
- An encoder-decoder Hugging Face model evaluated or asked to predict on batches without
  ``labels``: transformers said the decoder's ``input_ids`` were missing while the batch
  held the encoder's. Now the error says the decoder has no input and what to add.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from scramjet import Trainer

X = torch.randn(40, 6, generator=torch.Generator().manual_seed(0))
Y = torch.randint(0, 3, (40,), generator=torch.Generator().manual_seed(1))


def trainer() -> Trainer:
    model = nn.Linear(6, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return Trainer(model, nn.CrossEntropyLoss(), optimizer, callbacks=[])


SAMPLE_STREAMS = {
    "zip of tensors": lambda: zip(X, Y),
    "zip with int labels": lambda: zip(X, Y.tolist()),
    "generator of samples": lambda: ((x, y) for x, y in zip(X, Y)),
    "DataLoader(batch_size=None)": lambda: DataLoader(TensorDataset(X, Y), batch_size=None),
}


@pytest.mark.parametrize("name", list(SAMPLE_STREAMS))
def test_a_stream_of_samples_is_refused_with_the_fix(name: str) -> None:
    t = trainer()
    before = [p.detach().clone() for p in t.model.parameters()]
    with pytest.raises(ValueError, match=r"targets are a single value") as raised:
        t.train(SAMPLE_STREAMS[name](), num_epochs=1, per_device_batch_size=8)
    assert "list(zip(X, Y))" in str(raised.value)
    assert "per_device_batch_size does not apply" in str(raised.value)
    assert t.state.global_step == 0  # refused before any update
    assert all(torch.equal(a, b) for a, b in zip(before, t.model.parameters()))
    with pytest.raises(ValueError, match=r"in predict, the batch's targets are a single value"):
        t.predict(SAMPLE_STREAMS[name]())
    with pytest.raises(ValueError, match=r"in calculate_eval_batch_loss, the batch's targets"):
        t.evaluate(SAMPLE_STREAMS[name]())


def test_the_same_samples_as_a_list_or_batched_stream_train_as_batches() -> None:
    t = trainer()
    t.train(list(zip(X, Y)), num_epochs=1, per_device_batch_size=8)
    assert (t.state.global_step, t.state.samples_seen) == (5, 40)
    t.train(((X[i : i + 8], Y[i : i + 8]) for i in range(0, 40, 8)), num_epochs=1)
    assert (t.state.global_step, t.state.samples_seen) == (5, 40)
    assert tuple(t.predict(list(zip(X, Y))).shape) == (40, 3)


def t5_model() -> Any:
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(
        vocab_size=40, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1,
        num_heads=2, decoder_start_token_id=0, pad_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    return T5ForConditionalGeneration(config)


def test_an_encoder_decoder_model_without_labels_says_its_decoder_has_no_input() -> None:
    model = t5_model()
    ids = torch.randint(2, 40, (6, 5), generator=torch.Generator().manual_seed(2))
    data = [{"input_ids": i, "attention_mask": torch.ones(5, dtype=torch.long)} for i in ids]
    t = Trainer(model, None, torch.optim.AdamW(model.parameters(), lr=1e-3), callbacks=[])
    for call, hook in ((t.predict, "In predict"), (t.evaluate, "In evaluation")):
        with pytest.raises(ValueError, match=r"no 'labels' and no 'decoder_input_ids'") as raised:
            call(data, per_device_batch_size=3)
        assert hook in str(raised.value) and "model.generate" in str(raised.value)
    with pytest.raises(ValueError, match=r"In training, T5ForConditionalGeneration is an enc"):
        t.train(data, num_epochs=1, per_device_batch_size=3)
    # with labels, the decoder inputs are made from them: the same data predicts
    labelled = [{**d, "labels": d["input_ids"]} for d in data]
    out = t.predict(labelled, per_device_batch_size=3)
    assert tuple(out.logits.shape) == (6, 5, 40)
