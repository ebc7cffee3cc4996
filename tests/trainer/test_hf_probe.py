"""Hugging Face models the way their users bring them, beyond ``test_hf_models.py``.

Models are built from tiny configs and a word-level tokenizer is trained on in-memory
text, so nothing is downloaded. What is checked:

- ``predict`` over batches padded per batch (``DataCollatorForLanguageModeling``) joins
  outputs whose sequence dimension differs: padded to the longest with -100, each row equal
  to calling the model on its batch.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import (
    DataCollatorForLanguageModeling,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedTokenizerFast,
)
from transformers.utils import logging as hf_logging

from scramjet import Trainer

WORDS = ("the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "away", "and", "then")


@pytest.fixture(autouse=True)
def _quiet_transformers() -> Any:
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    yield
    hf_logging.set_verbosity(level)


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()  # type: ignore[assignment]
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator([" ".join(WORDS)], trainers.WordLevelTrainer(special_tokens=specials))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", mask_token="[MASK]"
    )


def sentences(n: int, seed: int = 0) -> list[str]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        length = int(torch.randint(3, 12, (1,), generator=g))
        out.append(
            " ".join(WORDS[int(i)] for i in torch.randint(0, len(WORDS), (length,), generator=g))
        )
    return out


def encoded(tokenizer: PreTrainedTokenizerFast, n: int, seed: int = 0) -> list[dict[str, Any]]:
    return [
        {"input_ids": e["input_ids"], "attention_mask": e["attention_mask"]}
        for e in (tokenizer(s) for s in sentences(n, seed))
    ]


def gpt2(vocab: int, seed: int = 0) -> GPT2LMHeadModel:
    config = GPT2Config(
        vocab_size=vocab, n_positions=32, n_embd=16, n_layer=1, n_head=2,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )  # fmt: skip
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return GPT2LMHeadModel(config)


def trainer_for(model: torch.nn.Module, loss_func: Any = None) -> Trainer:
    return Trainer(model, loss_func, torch.optim.AdamW(model.parameters(), lr=1e-3), callbacks=[])


# ------------------------------------------------------------------ predict, dynamic padding
def test_predict_joins_batches_padded_to_different_lengths(
    tokenizer: PreTrainedTokenizerFast,
) -> None:
    data = encoded(tokenizer, 10)
    collate = DataCollatorForLanguageModeling(tokenizer, mlm=False)
    model = gpt2(len(tokenizer))
    predicted = trainer_for(model).predict(data, per_device_batch_size=4, collate_fn=collate)
    longest = max(len(d["input_ids"]) for d in data)
    assert predicted.logits.shape == (10, longest, len(tokenizer))
    model.eval()
    with torch.no_grad():
        for start in range(0, 10, 4):
            batch = collate(data[start : start + 4])
            direct = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            width = batch["input_ids"].shape[1]
            rows = predicted.logits[start : start + 4]
            torch.testing.assert_close(rows[:, :width], direct.logits)
            assert (rows[:, width:] == -100).all()
