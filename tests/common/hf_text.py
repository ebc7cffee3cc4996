"""Small text data for the Hugging Face tests: a word-level tokenizer trained here (no
download), random sentences over its words, and transformers' logging kept quiet."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
from transformers.utils import logging as hf_logging

WORDS = ("the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "away", "and", "then")


@pytest.fixture(autouse=True)
def quiet_transformers() -> Iterator[None]:
    """transformers' warnings off during a test (import this fixture into a test module)."""
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    yield
    hf_logging.set_verbosity(level)


def word_tokenizer(padding_side: str = "right") -> PreTrainedTokenizerFast:
    """A tokenizer of :data:`WORDS` with [PAD], [UNK], [CLS], [SEP] and [MASK]."""
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()  # type: ignore[assignment]
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator([" ".join(WORDS)], trainers.WordLevelTrainer(special_tokens=specials))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="[PAD]",
        unk_token="[UNK]",
        mask_token="[MASK]",
        padding_side=padding_side,
    )


def sentences(n: int, seed: int = 0) -> list[str]:
    """``n`` sentences of 3 to 11 random words, the same for the same ``seed``."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        length = int(torch.randint(3, 12, (1,), generator=g))
        words = torch.randint(0, len(WORDS), (length,), generator=g)
        out.append(" ".join(WORDS[int(i)] for i in words))
    return out
