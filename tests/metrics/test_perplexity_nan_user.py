"""A model whose logits hold NaN gets a NaN perplexity with a warning that says where."""

from __future__ import annotations

import math

import pytest
import torch

from scramjet.metrics import PerplexityResults


def test_nan_logits_warn_and_name_the_position() -> None:
    logits, target = torch.randn(2, 3, 5), torch.randint(0, 5, (2, 3))
    logits[1, 2, 3] = float("nan")
    with pytest.warns(UserWarning, match=r"1 scored position.*\(1, 2\).*diverged"):
        result = PerplexityResults().compute(logits, target)
    assert math.isnan(result["perplexity"])


def test_minus_inf_on_masked_tokens_is_not_a_divergence(recwarn: pytest.WarningsRecorder) -> None:
    logits, target = torch.randn(2, 3, 5), torch.zeros(2, 3, dtype=torch.long)
    logits[:, :, 4] = float("-inf")  # a vocabulary entry the model may never predict
    result = PerplexityResults().compute(logits, target)
    assert math.isfinite(result["perplexity"])
    assert not [w for w in recwarn if "perplexity" in str(w.message)]


def test_nan_only_at_ignored_targets_is_left_out(recwarn: pytest.WarningsRecorder) -> None:
    logits, target = torch.randn(2, 3, 5), torch.randint(0, 5, (2, 3))
    target[0, 0] = -100
    clean = PerplexityResults().compute(logits, target)["perplexity"]
    logits[0, 0] = float("nan")  # padding the model never had to predict
    assert PerplexityResults().compute(logits, target)["perplexity"] == pytest.approx(clean)
    assert not [w for w in recwarn if "perplexity" in str(w.message)]


def test_an_overflowing_perplexity_says_why() -> None:
    target = torch.zeros(1, 4, dtype=torch.long)
    logits = torch.zeros(1, 4, 3)
    logits[..., 1] = 200.0  # the target token is e^-200 likely: exp(200) overflows
    with pytest.warns(UserWarning, match="overflowed to inf"):
        assert PerplexityResults().compute(logits, target)["perplexity"] == float("inf")
