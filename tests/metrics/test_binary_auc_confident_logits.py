"""ROC-AUC and PR-AUC of a confident model's logits match sklearn's: through a float32
sigmoid (or softmax) every logit above ~17 became 1.0, tying the best-ranked samples."""

from __future__ import annotations

import pytest
import sklearn.metrics as skm
import torch

from scramjet.metrics import BinaryResults


def _confident_logits() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (200,), generator=g)
    logits = (y * 2 - 1) * torch.rand(200, generator=g) * 30 + torch.randn(200, generator=g) * 20
    return logits, y


@pytest.mark.parametrize("layout", ["one score", "two scores", "stated logits"])
def test_auc_of_large_logits_matches_sklearn(layout: str) -> None:
    logits, y = _confident_logits()
    package = BinaryResults(scores="logits" if layout == "stated logits" else "auto")
    pred = torch.stack([-logits / 2, logits / 2], dim=1) if layout == "two scores" else logits
    out = package(pred, y)
    assert out["roc_auc"] == pytest.approx(skm.roc_auc_score(y, logits), abs=1e-6)
    assert out["pr_auc"] == pytest.approx(skm.average_precision_score(y, logits), abs=1e-6)
    decided = (logits > 0).long()
    assert out["accuracy"] == pytest.approx(skm.accuracy_score(y, decided))
    assert out["f1"] == pytest.approx(skm.f1_score(y, decided))


def test_padding_and_ties_are_kept_out_and_kept() -> None:
    pred = torch.tensor([40.0, 40.0, -3.0, 25.0, 0.2])
    y = torch.tensor([1, 0, 0, -100, 1])
    out = BinaryResults()(pred, y)
    kept = y != -100
    assert out["roc_auc"] == pytest.approx(skm.roc_auc_score(y[kept], pred[kept]))
    assert out["pr_auc"] == pytest.approx(skm.average_precision_score(y[kept], pred[kept]))
