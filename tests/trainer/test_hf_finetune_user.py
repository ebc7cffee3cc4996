"""Fine-tuning Hugging Face models as their users do, beyond the other ``test_hf_*`` files.

Models are built from tiny configs and a word-level tokenizer is trained on in-memory
text, so nothing is downloaded. What is checked:

- A result package evaluated with a collate function that draws at random
  (``DataCollatorForLanguageModeling(mlm=True)``, seeded or not) scores each prediction
  against the targets of the very batch the model saw, not those of a second draw.
- A run resumed mid-epoch with a seeded ``DataCollatorForLanguageModeling(seed=...)``
  (Hugging Face's way to make masking reproducible) masks its remaining batches as the
  uninterrupted run does: the collator's generator is saved with the training state.
- Targets passed to a result package's ``evaluate`` as one row per sample (lists or
  tensors of different lengths, token labels) are padded with -100 as ``predict`` pads
  outputs, and score as the targets of the collated batches do.
- Perplexity with no target left to score (every label ignored, or one-token rows
  shifted) is an error that says why, not a NaN.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from tests.common.hf_text import (
    quiet_transformers,  # noqa: F401  (autouse fixture)
    sentences,
    word_tokenizer,
)
from transformers import (
    BertConfig,
    BertForMaskedLM,
    BertForTokenClassification,
    DataCollatorForLanguageModeling,
    DataCollatorForTokenClassification,
    PreTrainedTokenizerFast,
)

from scramjet import Trainer
from scramjet.callbacks import SaveTrainingStateCallback, TrainerCallback
from scramjet.metrics import ClassificationResults, PerplexityResults


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    return word_tokenizer()


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


class RecordLabels(TrainerCallback):
    """Keeps the masked labels of every training batch; raises after update ``stop_at``."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.labels: list[torch.Tensor] = []
        self.stop_at = stop_at

    def on_train_step_end(self, trainer: Trainer, batch: Any = None, **kwargs: Any) -> None:
        self.labels.append(batch["labels"].clone())

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.global_step == self.stop_at:
            raise RuntimeError("crash")


def masked_lm_run(
    tokenizer: PreTrainedTokenizerFast,
    folder: Any,
    stop_at: int | None = None,
    resume: bool = False,
) -> RecordLabels:
    data = [{"input_ids": tokenizer(s)["input_ids"]} for s in sentences(24)]
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=32,
    )  # fmt: skip
    torch.manual_seed(0)
    model = BertForMaskedLM(config)
    collate = DataCollatorForLanguageModeling(tokenizer, mlm=True, seed=3)
    recorder = RecordLabels(stop_at)
    trainer = Trainer(
        model, None, torch.optim.SGD(model.parameters(), lr=0.1), seed=0,
        callbacks=[recorder, SaveTrainingStateCallback(folder, every_n_steps=2)],
    )  # fmt: skip
    try:
        trainer.train(
            data, num_epochs=2, per_device_batch_size=4, collate_fn=collate,
            resume_from=folder if resume else None,
        )  # fmt: skip
    except RuntimeError:
        assert stop_at is not None
    return recorder


def test_resume_with_a_seeded_masking_collator_masks_as_the_uninterrupted_run(
    tokenizer: PreTrainedTokenizerFast, tmp_path: Any
) -> None:
    whole = masked_lm_run(tokenizer, tmp_path / "whole")
    masked_lm_run(tokenizer, tmp_path / "cut", stop_at=9)
    resumed = masked_lm_run(tokenizer, tmp_path / "cut", resume=True)

    assert len(resumed.labels) == 4  # saved at update 8 of 12: 4 batches left
    for expected, got in zip(whole.labels[-4:], resumed.labels):
        assert torch.equal(expected, got)


@pytest.mark.parametrize(
    ("targets", "shift", "why"),
    [
        (torch.full((2, 5), -100), False, "every target equals ignore_index=-100"),
        (torch.tensor([[3], [4]]), True, "a row of one token has no next token"),
    ],
    ids=["every-target-ignored", "shifted-one-token-rows"],
)
def test_perplexity_with_no_target_to_score_says_so_instead_of_nan(
    targets: torch.Tensor, shift: bool, why: str
) -> None:
    logits = torch.randn(2, targets.shape[1], 7)

    with pytest.raises(ValueError, match=r"no target to score") as raised:
        PerplexityResults(shift_labels=shift).compute(logits, targets)

    assert why in str(raised.value)
    assert f"shape {tuple(targets.shape)}" in str(raised.value)


def tagged_sentences(tokenizer: PreTrainedTokenizerFast, n: int) -> list[dict[str, Any]]:
    """Token-classification samples of different lengths: label 1 on even token ids."""
    out = []
    for text in sentences(n):
        encoded = tokenizer(text)
        labels = [int(i % 2 == 0) for i in encoded["input_ids"]]
        out.append({**encoded, "labels": labels})
    return out


@pytest.mark.parametrize("as_tensors", [False, True], ids=["lists", "tensors"])
def test_result_package_takes_given_per_sample_targets_of_different_lengths(
    tokenizer: PreTrainedTokenizerFast, as_tensors: bool
) -> None:
    data = tagged_sentences(tokenizer, 20)
    collate = DataCollatorForTokenClassification(tokenizer)
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=32, num_labels=2,
    )  # fmt: skip
    torch.manual_seed(0)
    model = BertForTokenClassification(config)
    trainer = Trainer(model, None, torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[])
    given = [torch.tensor(d["labels"]) if as_tensors else d["labels"] for d in data]

    scored = ClassificationResults().evaluate(
        trainer, data, per_device_batch_size=8, collate_fn=collate, targets=given
    )

    read = ClassificationResults().evaluate(
        trainer, data, per_device_batch_size=8, collate_fn=collate
    )  # the targets of the collated batches
    assert scored["accuracy"] == pytest.approx(read["accuracy"])
    assert scored["confusion_matrix"] == read["confusion_matrix"]
    assert sum(map(sum, scored["confusion_matrix"])) == sum(len(d["labels"]) for d in data)
