"""A user's checks that the result packages report the right numbers on awkward inputs:
one class, labels outside the classes, NaN scores, one-class binary targets, targets far
from zero, empty inputs and labels held as numpy arrays. References are computed by hand
or with scikit-learn, never with the package itself."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

from scramjet.metrics import (
    BinaryResults,
    BleuResults,
    ClassificationResults,
    QAResults,
    RegressionResults,
    RougeResults,
)


def test_one_class_everywhere_is_scored_not_refused() -> None:
    # a small validation split where every target and every prediction is class 0
    out = ClassificationResults()(torch.tensor([0, 0, 0, 0]), torch.tensor([0, 0, 0, 0]))
    assert out["accuracy"] == 1.0
    for name in ("precision", "recall", "f1"):
        assert out[f"{name}_macro"] == 1.0
        assert out[f"{name}_micro"] == 1.0
    assert out["confusion_matrix"] == [[4]]


def test_one_class_with_a_wrong_prediction_matches_sklearn() -> None:
    y, p = np.array([1, 1, 1, 1]), np.array([1, 1, 0, 1])
    out = ClassificationResults()(torch.tensor(p), torch.tensor(y))
    assert out["f1_macro"] == pytest.approx(
        skm.f1_score(y, p, average="macro", zero_division=0), abs=1e-6
    )
    assert out["confusion_matrix"] == skm.confusion_matrix(y, p).tolist()


@pytest.mark.parametrize(
    ("pred", "target", "num_classes", "named"),
    [
        ([0, 1, 1], [0, -1, 1], None, "y_true holds label -1"),
        ([0, 3, 1], [0, 1, 1], 2, "y_pred holds label 3"),
        ([0, 1, 1], [0, 5, 1], 3, "y_true holds label 5"),
    ],
)
def test_labels_outside_the_classes_are_named(
    pred: list[int], target: list[int], num_classes: int | None, named: str
) -> None:
    with pytest.raises(ValueError, match=named) as info:
        ClassificationResults(num_classes)(torch.tensor(pred), torch.tensor(target))
    assert "num_classes" in str(info.value)


def test_nan_class_scores_are_refused() -> None:
    logits = torch.tensor([[0.1, 2.0], [float("nan"), 0.0], [1.0, 0.0]])
    with pytest.raises(ValueError, match=r"1 NaN score.*index 1"):
        ClassificationResults()(logits, torch.tensor([1, 0, 0]))
    # a NaN on a skipped (-100) position is not scored, so not refused
    out = ClassificationResults()(logits, torch.tensor([1, -100, 0]))
    assert out["accuracy"] == 1.0


def test_nan_binary_scores_are_refused() -> None:
    with pytest.raises(ValueError, match="NaN"):
        BinaryResults()(torch.tensor([0.2, float("nan"), 0.9]), torch.tensor([0, 1, 1]))


@pytest.mark.parametrize("label", [0, 1])
def test_one_class_binary_targets_give_nan_auc_not_zero(label: int) -> None:
    scores = torch.tensor([0.1, 0.4, 0.35, 0.8, 0.7])
    with pytest.warns(UserWarning, match="undefined"):
        out = BinaryResults()(scores, torch.full((5,), label))
    assert math.isnan(out["roc_auc"])  # was 0.0: "every pair ranked wrong"
    if label == 0:
        assert math.isnan(out["pr_auc"])  # no positive: no recall to average over
    else:
        assert out["pr_auc"] == pytest.approx(1.0)
    assert out["accuracy"] == pytest.approx(np.mean((scores.numpy() > 0.5) == label))


def test_binary_skips_padding_and_names_other_targets() -> None:
    scores = np.array([0.9, 0.2, 0.7, 0.6, 0.1, 0.4])
    target = np.array([1, 0, -100, 0, 1, -100])
    out = BinaryResults()(torch.tensor(scores), torch.tensor(target))
    kept = target != -100
    assert out["roc_auc"] == pytest.approx(skm.roc_auc_score(target[kept], scores[kept]))
    assert out["accuracy"] == pytest.approx(skm.accuracy_score(target[kept], scores[kept] > 0.5))
    with pytest.raises(ValueError, match=r"0 or 1; y_true holds 2"):
        BinaryResults()(torch.tensor(scores), torch.tensor([1, 0, 2, 0, 1, 0]))
    with pytest.raises(ValueError, match="0 or 1"):  # smoothed targets were truncated to 0
        BinaryResults()(torch.tensor(scores), torch.tensor([0.9, 0.1, 0.9, 0.1, 0.9, 0.1]))


def test_regression_far_from_zero_matches_sklearn() -> None:
    rng = np.random.default_rng(3)
    y = (1000 + rng.normal(size=1000)).astype(np.float32)
    p = (y + rng.normal(scale=0.1, size=1000)).astype(np.float32)
    out = RegressionResults()(torch.tensor(p), torch.tensor(y))
    y64, p64 = y.astype(np.float64), p.astype(np.float64)
    assert out["r2"] == pytest.approx(skm.r2_score(y64, p64), abs=1e-7)  # was off by 5e-4
    assert out["mse"] == pytest.approx(skm.mean_squared_error(y64, p64), rel=1e-9)
    prices = 1e6 + rng.normal(size=50)
    guess = prices + rng.normal(scale=0.01, size=50)
    out = RegressionResults()(guess, prices)
    assert out["r2"] == pytest.approx(skm.r2_score(prices, guess), abs=1e-6)  # was 0.0


@pytest.mark.parametrize(
    ("package", "y_pred", "y_true", "named"),
    [
        (BinaryResults(), torch.tensor([]), torch.tensor([]), "no target"),
        (RegressionResults(), [], [], "empty"),
        (BleuResults(), [], [], "no prediction"),
        (RougeResults(), [], [], "no prediction"),
        (QAResults(), [], [], "no prediction"),
    ],
)
def test_empty_inputs_are_refused_clearly(
    package: object, y_pred: object, y_true: object, named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        package(y_pred, y_true)  # type: ignore[operator]


def test_labels_as_a_list_of_numpy_scalar_arrays() -> None:
    y = [np.array(v, dtype=np.int32) for v in (0, 1, 2, 1, 0)]
    p = np.array([0, 1, 1, 1, 2])
    out = ClassificationResults()(p, y)
    assert out["accuracy"] == pytest.approx(3 / 5)
    assert out["confusion_matrix"] == skm.confusion_matrix(np.stack(y), p).tolist()


def test_bleu_smoothing_adds_one_from_bigrams_on_as_documented() -> None:
    # pred "a b c d", ref "a b x d": 1-grams 3/4, 2-grams 1/3, 3-grams 0/2, 4-grams 0/1
    # smoothed (BLEU+1): 3/4 kept, then (1+1)/(3+1), (0+1)/(2+1), (0+1)/(1+1); same length
    expected = math.exp((math.log(3 / 4) + math.log(2 / 4) + math.log(1 / 3) + math.log(1 / 2)) / 4)
    out = BleuResults(n_gram=4, smooth=True)(["a b c d"], ["a b x d"])
    assert out["bleu"] == pytest.approx(expected, rel=1e-6)
    assert BleuResults(n_gram=4)(["a b c d"], ["a b x d"])["bleu"] == 0.0  # a zero precision
