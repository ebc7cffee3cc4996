"""Float64 scores give the classification results scikit-learn gives, to 1e-12: accuracy,
precision, recall and F1 are ratios of counts divided in float64 (torchmetrics divides in
float32, 8th-digit off), and a float64 probability keeps its side of the threshold."""

from __future__ import annotations

import numpy as np
import pytest
import sklearn.metrics as skm
import torch

from scramjet.metrics import BinaryResults, ClassificationResults, MultiLabelResults

N = 997  # no ratio of 997 samples is a float32 number exactly
EXACT = {"abs": 1e-12, "rel": 0}


def _rates_vs_sklearn(out: dict, y_true: np.ndarray, y_pred: np.ndarray, **kw: object) -> None:
    for avg in ("macro", "micro"):
        want = {
            f"precision_{avg}": skm.precision_score(y_true, y_pred, average=avg, **kw),
            f"recall_{avg}": skm.recall_score(y_true, y_pred, average=avg, **kw),
            f"f1_{avg}": skm.f1_score(y_true, y_pred, average=avg, **kw),
        }
        for name, value in want.items():
            assert out[name] == pytest.approx(value, **EXACT), name


def test_classification_accuracy_of_float64_scores_is_the_exact_ratio() -> None:
    rng = np.random.default_rng(0)
    target, scores = rng.integers(0, 4, N), rng.random((N, 4))
    pred = scores.argmax(axis=1)
    out = ClassificationResults()(torch.from_numpy(scores), torch.from_numpy(target))
    assert out["accuracy"] == pytest.approx(skm.accuracy_score(target, pred), **EXACT)
    assert out["accuracy"] == int((pred == target).sum()) / N
    _rates_vs_sklearn(out, target, pred)
    assert out["confusion_matrix"] == skm.confusion_matrix(target, pred).tolist()


def test_classification_macro_skips_classes_no_one_holds_as_sklearn() -> None:
    rng = np.random.default_rng(1)
    target = rng.integers(0, 3, N)
    pred = np.where(rng.random(N) < 0.7, target, rng.integers(0, 3, N))
    out = ClassificationResults(num_classes=5)(torch.from_numpy(pred), torch.from_numpy(target))
    assert out["accuracy"] == pytest.approx(skm.accuracy_score(target, pred), **EXACT)
    _rates_vs_sklearn(out, target, pred)
    assert len(out["confusion_matrix"]) == 5  # the two empty classes keep their rows


def test_binary_results_of_float64_scores_match_sklearn() -> None:
    rng = np.random.default_rng(2)
    target = rng.integers(0, 2, N)
    logits = rng.normal(size=N) + target  # ties none, overlap plenty
    probs = 1 / (1 + np.exp(-logits))
    for given in (probs, logits):
        out = BinaryResults()(torch.from_numpy(given), torch.from_numpy(target))
        decided = (probs > 0.5).astype(int)
        assert out["accuracy"] == pytest.approx(skm.accuracy_score(target, decided), **EXACT)
        assert out["f1"] == pytest.approx(skm.f1_score(target, decided), **EXACT)
        assert out["roc_auc"] == pytest.approx(skm.roc_auc_score(target, given), **EXACT)
        assert out["pr_auc"] == pytest.approx(skm.average_precision_score(target, given), **EXACT)


def test_binary_auc_with_tied_scores_matches_sklearn() -> None:
    rng = np.random.default_rng(3)
    target = rng.integers(0, 2, N)
    scores = np.round(rng.random(N) * 0.6 + 0.4 * target, 1)  # eleven values: many ties
    out = BinaryResults()(torch.from_numpy(scores), torch.from_numpy(target))
    assert out["roc_auc"] == pytest.approx(skm.roc_auc_score(target, scores), **EXACT)
    assert out["pr_auc"] == pytest.approx(skm.average_precision_score(target, scores), **EXACT)


def test_float64_probability_just_above_the_threshold_is_positive() -> None:
    # 0.5 + 1e-10 rounds to 0.5 in float32, which is not above 0.5
    scores = torch.tensor([0.5 + 1e-10, 0.2, 0.9, 0.5 + 1e-10], dtype=torch.float64)
    target = torch.tensor([1, 0, 1, 1])
    out = BinaryResults()(scores, target)
    assert out["accuracy"] == 1.0
    assert out["f1"] == 1.0
    multi = MultiLabelResults()(scores.reshape(2, 2), target.reshape(2, 2))
    assert multi["subset_accuracy"] == 1.0


def test_multilabel_results_of_float64_scores_match_sklearn() -> None:
    rng = np.random.default_rng(4)
    target, scores = rng.integers(0, 2, (N, 5)), rng.random((N, 5))
    scores[:, 4] *= 0.4  # a label never predicted: its precision is 0 (zero_division=0)
    pred = (scores > 0.5).astype(int)
    for package in (MultiLabelResults(), ClassificationResults(multi_label=True)):
        out = package(torch.from_numpy(scores), torch.from_numpy(target))
        assert out["subset_accuracy"] == pytest.approx(skm.accuracy_score(target, pred), **EXACT)
        assert out["hamming_loss"] == pytest.approx(skm.hamming_loss(target, pred), **EXACT)
        _rates_vs_sklearn(out, target, pred, zero_division=0)


def test_padded_targets_are_left_out_of_the_exact_counts() -> None:
    rng = np.random.default_rng(5)
    target, scores = rng.integers(0, 3, N), rng.random((N, 3))
    padded = np.concatenate([target, np.full(11, -100)])
    noise = np.concatenate([scores, rng.random((11, 3))])
    out = ClassificationResults()(torch.from_numpy(noise), torch.from_numpy(padded))
    assert out["accuracy"] == pytest.approx(
        skm.accuracy_score(target, scores.argmax(axis=1)), **EXACT
    )
