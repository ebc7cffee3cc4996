"""Fine-tuning Hugging Face models as their users do, beyond the other ``test_hf_*`` files.

Models are built from tiny configs and a word-level tokenizer is trained on in-memory
text, so nothing is downloaded. What is checked:

- A result package evaluated with a collate function that draws at random
  (``DataCollatorForLanguageModeling(mlm=True)``, seeded or not) scores each prediction
  against the targets of the very batch the model saw, not those of a second draw.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import DataCollatorForLanguageModeling, PreTrainedTokenizerFast
from transformers.utils import logging as hf_logging

from scramjet import Trainer
from scramjet.metrics import ClassificationResults

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


class CopyInputs(torch.nn.Module):
    """Predicts, at every position, the token it is given (a masked token stays masked)."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.vocab = vocab
        self.bias = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids: torch.Tensor, attention_mask: Any = None) -> dict[str, Any]:
        one_hot = torch.nn.functional.one_hot(input_ids, self.vocab).float()
        return {"logits": one_hot + self.bias}


@pytest.mark.parametrize("seed", [None, 3])
def test_result_package_scores_randomly_masked_batches_against_their_own_labels(
    tokenizer: PreTrainedTokenizerFast, seed: int | None
) -> None:
    data = [{"input_ids": tokenizer(s)["input_ids"]} for s in sentences(48)]
    # Every chosen position becomes [MASK]: its label is the original token, which a model
    # that copies its input never predicts when the labels belong to the batch it saw.
    collate = DataCollatorForLanguageModeling(
        tokenizer, mlm=True, mlm_probability=0.4, mask_replace_prob=1.0,
        random_replace_prob=0.0, seed=seed,
    )  # fmt: skip
    model = CopyInputs(len(tokenizer))
    trainer = Trainer(model, None, torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[])
    torch.manual_seed(0)

    scored = ClassificationResults().evaluate(
        trainer, data, per_device_batch_size=8, collate_fn=collate
    )

    assert sum(map(sum, scored["confusion_matrix"])) > 0
    assert scored["accuracy"] == 0.0
