"""Token accuracy of a Hugging Face causal language model's outputs.

A causal LM's logits at position ``t`` predict the token at ``t + 1`` (its ``labels`` are
its ``input_ids``; its own loss shifts them). ``ClassificationResults`` scores a
``CausalLMOutput...`` the way ``PerplexityResults`` does: ``shift_labels=True`` compares
the logits at ``t`` with the target at ``t + 1``; without it, such an output is scored
unshifted with a warning that says so.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from tests.common.hf_text import quiet_transformers  # noqa: F401  (autouse fixture)
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.modeling_outputs import CausalLMOutputWithCrossAttentions

from scramjet import Trainer
from scramjet.metrics import ClassificationResults

VOCAB = 12


def counting_rows(n: int, length: int) -> torch.Tensor:
    """Rows that count up modulo the vocabulary: each token fixes the next one."""
    starts = torch.arange(n).unsqueeze(1)
    return (starts + torch.arange(length)) % VOCAB


def test_a_perfect_next_token_model_scores_full_accuracy_when_shifted() -> None:
    labels = counting_rows(6, 7)
    labels[0, 5:] = -100  # a padded row: its padding is left out
    # the logits at t name the token at t + 1, as a trained causal LM's do
    nxt = torch.roll(counting_rows(6, 7), shifts=-1, dims=1)
    output = CausalLMOutputWithCrossAttentions(logits=torch.nn.functional.one_hot(nxt, VOCAB) * 5.0)

    scored = ClassificationResults(shift_labels=True).compute(output, labels)

    assert scored["accuracy"] == 1.0
    with pytest.warns(UserWarning, match=r"ClassificationResults\(shift_labels=True\)"):
        unshifted = ClassificationResults().compute(output, labels)
    assert unshifted["accuracy"] == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an explicit choice is not warned about
        assert ClassificationResults(shift_labels=False).compute(output, labels) == unshifted


def test_shifted_accuracy_through_evaluate_matches_a_hand_count() -> None:
    torch.manual_seed(0)
    model = GPT2LMHeadModel(
        GPT2Config(vocab_size=VOCAB, n_embd=16, n_layer=1, n_head=2, n_positions=16)
    )
    rows = torch.randint(0, VOCAB, (10, 6))
    data = [{"input_ids": r, "labels": r} for r in rows]
    trainer = Trainer(model, None, torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[])

    scored = ClassificationResults(shift_labels=True).evaluate(
        trainer, data, per_device_batch_size=4
    )

    model.eval()
    with torch.no_grad():
        predicted = model(input_ids=rows).logits[:, :-1].argmax(-1)
    expected = (predicted == rows[:, 1:]).float().mean().item()
    assert scored["accuracy"] == pytest.approx(expected)


def test_shifting_labels_of_one_per_sample_is_refused() -> None:
    with pytest.raises(ValueError, match=r"shift_labels=True.*\[N, T\]"):
        ClassificationResults(shift_labels=True).compute(torch.randn(4, 3), torch.arange(4) % 3)
