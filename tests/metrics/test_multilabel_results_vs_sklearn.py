"""Multi-label targets: ``MultiLabelResults`` against ``sklearn.metrics``, and
``ClassificationResults`` refusing them rather than scoring labels as samples."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

from scramjet.metrics import ClassificationResults
from scramjet.metrics.multilabel import MultiLabelResults


def _multi_hot(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    target = (rng.random((40, 5)) < 0.4).astype(np.int64)
    target[:3] = [1, 1, 0, 0, 0]  # rows with two labels: not one-hot
    target[:, 4] = 0  # a label no sample holds
    scores = np.clip(target * 0.6 + rng.random((40, 5)) * 0.5, 0, 1)
    return scores, target


def test_classification_results_refuses_multi_hot_targets() -> None:
    # Element-by-element scoring reported each label as a sample: "accuracy" well above
    # sklearn's (subset) accuracy of the same predictions, without a word.
    scores, target = _multi_hot(0)
    with pytest.raises(ValueError, match=r"multi-hot.*MultiLabelResults.*reshape\(-1\)"):
        ClassificationResults()(torch.tensor(scores), torch.tensor(target))


def test_one_hot_targets_are_still_one_class_per_sample() -> None:
    target = np.eye(3, dtype=np.int64)[[0, 1, 2, 1]]
    scores = torch.tensor([[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.6, 0.2, 0.2], [0.1, 0.8, 0.1]])
    out = ClassificationResults()(scores, torch.tensor(target))
    assert out["accuracy"] == pytest.approx(0.75)


@pytest.mark.parametrize("as_logits", [False, True])
def test_multilabel_results_match_sklearn(as_logits: bool) -> None:
    scores, target = _multi_hot(1)
    decided = (scores > 0.5).astype(np.int64)
    pred = torch.tensor(scores).logit(eps=1e-6) if as_logits else torch.tensor(scores)
    out = MultiLabelResults()(pred, torch.tensor(target))
    assert out["subset_accuracy"] == pytest.approx(skm.accuracy_score(target, decided))
    assert out["hamming_loss"] == pytest.approx(skm.hamming_loss(target, decided))
    for avg in ("macro", "micro"):
        for name, fn in (
            ("precision", skm.precision_score),
            ("recall", skm.recall_score),
            ("f1", skm.f1_score),
        ):
            expected = fn(target, decided, average=avg, zero_division=0)
            assert out[f"{name}_{avg}"] == pytest.approx(expected, abs=1e-6), (name, avg)


def test_multilabel_results_refuses_wrong_inputs() -> None:
    scores, target = _multi_hot(2)
    with pytest.raises(ValueError, match=r"y_pred \(40, 4\) and y_true \(40, 5\)"):
        MultiLabelResults()(torch.tensor(scores[:, :4]), torch.tensor(target))
    with pytest.raises(ValueError, match="holds 3"):
        MultiLabelResults()(torch.tensor(scores), torch.tensor(target * 3))
    nan = torch.tensor(scores)
    nan[5, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        MultiLabelResults()(nan, torch.tensor(target))
