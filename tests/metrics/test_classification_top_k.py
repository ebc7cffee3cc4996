"""ClassificationResults(top_k=...): the share of samples whose target is among the k
highest class scores, checked against scikit-learn's top_k_accuracy_score."""

from __future__ import annotations

import pytest
import torch
from sklearn.metrics import top_k_accuracy_score

from scramjet.metrics import ClassificationResults


def test_top_k_accuracy_matches_scikit_learn() -> None:
    gen = torch.Generator().manual_seed(0)
    scores = torch.randn(500, 10, generator=gen, dtype=torch.float64)
    target = torch.randint(0, 10, (500,), generator=gen)
    out = ClassificationResults(top_k=(1, 3, 5))(scores, target)
    for k in (1, 3, 5):
        expected = top_k_accuracy_score(target.numpy(), scores.numpy(), k=k, labels=range(10))
        assert out[f"top{k}_accuracy"] == pytest.approx(expected, abs=1e-12), k
    assert out["top1_accuracy"] == pytest.approx(out["accuracy"], abs=1e-6)
    assert out["top1_accuracy"] < out["top3_accuracy"] < out["top5_accuracy"] < 1.0


def test_top_k_leaves_out_padded_targets_and_scores_tokens() -> None:
    scores = torch.tensor([[[0.1, 0.7, 0.2], [0.5, 0.3, 0.2]], [[0.2, 0.2, 0.6], [0.3, 0.3, 0.4]]])
    target = torch.tensor([[2, 1], [0, -100]])  # ranks 2nd, 2nd, 2nd (tie: lower index first)
    out = ClassificationResults(top_k=[1, 2])(scores, target)
    assert out["top1_accuracy"] == 0.0
    assert out["top2_accuracy"] == 1.0


def test_top_k_as_one_int() -> None:
    out = ClassificationResults(top_k=2)(torch.tensor([[3.0, 2.0, 1.0]]), torch.tensor([1]))
    assert out["top2_accuracy"] == 1.0 and "top1_accuracy" not in out


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "5", (1, 0), [None]])
def test_top_k_refuses_what_is_not_positive_ints(bad: object) -> None:
    with pytest.raises(ValueError, match=r"top_k must be a positive int or a sequence"):
        ClassificationResults(top_k=bad)  # type: ignore[arg-type]


def test_top_k_needs_scores_and_enough_classes() -> None:
    with pytest.raises(ValueError, match=r"top_k needs class scores"):
        ClassificationResults(top_k=2)(torch.tensor([0, 1, 2]), torch.tensor([0, 1, 1]))
    with pytest.raises(ValueError, match=r"top_k=5 is more than the 3 classes"):
        ClassificationResults(top_k=(1, 5))(torch.randn(4, 3), torch.tensor([0, 1, 2, 0]))
    with pytest.raises(ValueError, match=r"multi_label=True"):
        ClassificationResults(top_k=2, multi_label=True)(torch.randn(4, 3), torch.ones(4, 3))
