"""Dict batches with columns the model's forward does not take (an ``"id"``, a ``"text"``
the collate kept): they are left out of ``model(**batch)``, as Hugging Face's Trainer drops
unused columns, with one warning per model naming them. A Hugging Face forward's
``**kwargs`` takes only the settings transformers names (``TransformersKwargs``), so other
keys are not passed through it."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import nn
from transformers import BertConfig, BertForSequenceClassification, GPT2Config, GPT2LMHeadModel

from scramjet import Trainer

VOCAB, LENGTH = 20, 6


def _bert() -> BertForSequenceClassification:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=LENGTH,
        num_labels=2,
    )
    return BertForSequenceClassification(config)


def _gpt2() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=VOCAB, n_embd=16, n_layer=1, n_head=2, n_positions=LENGTH)
    config.resid_pdrop = config.embd_pdrop = config.attn_pdrop = 0.0  # the same draws
    config.bos_token_id = config.eos_token_id = 0
    return GPT2LMHeadModel(config)


def _samples(n: int, causal: bool) -> list[dict[str, Any]]:
    g = torch.Generator().manual_seed(1)
    out = []
    for i in range(n):
        ids = torch.randint(1, VOCAB, (LENGTH,), generator=g)
        labels = ids.clone() if causal else torch.tensor(i % 2)
        out.append({"input_ids": ids, "labels": labels, "id": torch.tensor(i), "text": "é" * i})
    return out


def _kwargs_seen(model: nn.Module) -> list[set[str]]:
    seen: list[set[str]] = []

    def hook(module: nn.Module, args: Any, kwargs: dict[str, Any]) -> None:
        seen.append(set(kwargs))

    model.register_forward_pre_hook(hook, with_kwargs=True)
    return seen


def _train(model: nn.Module, samples: list[dict[str, Any]]) -> list[str]:
    trainer = Trainer(
        model, loss_func=None, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), seed=0
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train(samples, num_epochs=2, per_device_batch_size=4)
        trainer.evaluate(samples, per_device_batch_size=4)
        trainer.predict(samples, per_device_batch_size=4)
    return [str(w.message) for w in caught if "does not take" in str(w.message)]


def test_bert_batch_with_id_and_text_columns_trains_without_them() -> None:
    model = _bert()
    seen = _kwargs_seen(model)
    messages = _train(model, _samples(10, causal=False))
    assert seen and all(not ({"id", "text"} & keys) for keys in seen), seen
    assert len(messages) == 1, messages
    assert "'id'" in messages[0] and "'text'" in messages[0]
    assert "BertForSequenceClassification" in messages[0]


def test_gpt2_batch_with_extra_columns_matches_the_batch_without_them() -> None:
    with_extra, without = _gpt2(), _gpt2()
    samples = _samples(8, causal=True)
    seen = _kwargs_seen(with_extra)
    assert len(_train(with_extra, samples)) == 1
    plain = [{k: s[k] for k in ("input_ids", "labels")} for s in samples]
    assert _train(without, plain) == []
    assert all(not ({"id", "text"} & keys) for keys in seen), seen
    for a, b in zip(with_extra.parameters(), without.parameters(), strict=True):
        assert torch.equal(a, b)


def test_misspelled_key_of_a_plain_module_is_named() -> None:
    class Tagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, 2)

        def forward(
            self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
        ) -> torch.Tensor:
            x = self.embed(input_ids)
            if attention_mask is not None:
                x = x * attention_mask.unsqueeze(-1)
            return x.mean(1)

    samples = [
        {"input_ids": s["input_ids"], "attn_mask": torch.ones(LENGTH), "labels": s["labels"]}
        for s in _samples(8, causal=False)
    ]
    model = Tagger()
    trainer = Trainer(
        model, loss_func=nn.CrossEntropyLoss(), optimizer=torch.optim.SGD(model.parameters())
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train(samples, num_epochs=1, per_device_batch_size=4)
    messages = [str(w.message) for w in caught if "does not take" in str(w.message)]
    assert len(messages) == 1 and "'attn_mask'" in messages[0], messages
    assert "labels" not in messages[0]  # the targets, read by loss_func, are not "unused"
