"""Result packages against scikit-learn where a practitioner's inputs carry padding
(-100, as ``predict`` and a list of ragged batches add it), two probabilities per sample,
float16 logits, or a NaN target; and the AIToolbox-compat metrics against scikit-learn."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from sklearn import metrics as sk

from scramjet.metrics import BinaryResults, ClassificationResults, MultiLabelResults

T = torch.tensor


def test_padding_does_not_turn_probabilities_into_logits() -> None:
    probs = T([0.1, 0.2, 0.9, 0.3, 0.8, 0.1, 0.2])
    target = T([0, 0, 1, 0, 1, 0, 0])
    whole = ClassificationResults()(probs, target)
    batches = ClassificationResults()([probs[:4], probs[4:]], [target[:4], target[4:]])
    assert whole["accuracy"] == batches["accuracy"] == 1.0, (whole, batches)
    assert batches["confusion_matrix"] == [[5, 0], [0, 2]]
    padded = ClassificationResults()(T([0.2, 0.3, 0.7, -100.0]), T([0, 0, 1, -100]))
    assert padded["accuracy"] == 1.0, padded
    multi = MultiLabelResults()(T([[0.2, 0.7], [0.3, -100.0]]), T([[0, 1], [0, -100]]))
    assert multi["subset_accuracy"] == 1.0 and multi["hamming_loss"] == 0.0, multi


def test_two_probabilities_per_sample_are_taken_as_they_are() -> None:
    probs = T([[0.2, 0.8], [0.9, 0.1], [0.25, 0.75], [0.35, 0.65]])
    target = T([1, 0, 1, 0])
    for threshold in (0.5, 0.7):
        two = BinaryResults(threshold=threshold)(probs, target)
        one = BinaryResults(threshold=threshold)(probs[:, 1], target)
        assert two == one, (threshold, two, one)
    assert BinaryResults(threshold=0.7)(probs, target)["accuracy"] == 1.0
    scores, _ = BinaryResults().scores_and_labels(probs, target)
    assert torch.equal(scores, probs[:, 1])
    logits = probs.log()  # rows of logits: still read through a softmax
    scores, _ = BinaryResults().scores_and_labels(logits, target)
    torch.testing.assert_close(scores, probs[:, 1])
    with pytest.raises(ValueError, match="outside"):
        BinaryResults(scores="probabilities")(logits, target)


def test_hamming_loss_is_the_fraction_of_wrong_scored_labels() -> None:
    rng = np.random.default_rng(0)
    scores = rng.random((40, 5))
    target = (rng.random((40, 5)) > 0.5).astype(np.int64)
    got = MultiLabelResults()(T(scores), T(target))["hamming_loss"]
    assert got == pytest.approx(sk.hamming_loss(target, scores > 0.5), abs=1e-12)
    # labels marked -100 are left out: 1 wrong of 4 scored, and a column never scored
    uneven = MultiLabelResults()(
        T([[0.9, 0.9], [0.9, 0.1], [0.9, 0.1]]), T([[1, 0], [1, -100], [1, -100]])
    )
    assert uneven["hamming_loss"] == 0.25, uneven
    unscored = MultiLabelResults()(T([[0.9, 0.1], [0.1, 0.1]]), T([[1, -100], [0, -100]]))
    assert unscored["hamming_loss"] == 0.0, unscored


def test_float16_logits_near_zero_keep_their_side() -> None:
    logits = T([[0.0004, -3.0], [2.0, -0.0004]])
    target = T([[1, 0], [1, 0]])
    for kind in ("auto", "logits"):
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            got = MultiLabelResults(scores=kind)(logits.to(dtype), target)
            assert got["subset_accuracy"] == 1.0, (kind, dtype, got)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0.5])
def test_a_target_that_is_not_a_class_index_is_named(bad: float) -> None:
    with pytest.raises(ValueError, match="not class indices") as caught:
        ClassificationResults()(T([[0.0, 1.0], [1.0, 0.0]]), T([bad, 0.0]))
    assert "index 0" in str(caught.value) and "-9223372036854775808" not in str(caught.value)


def test_aitoolbox_metrics_match_sklearn() -> None:
    from scramjet.compat.aitoolbox.experiment.core_metrics.classification import (
        AccuracyMetric,
        F1ScoreMetric,
        ROCAUCMetric,
    )
    from scramjet.compat.aitoolbox.experiment.result_package.basic_packages import (
        BinaryClassificationResultPackage,
    )

    y = [1, 0, 1, 0]
    for scores in ([20.0, 18.0, 25.0, -1.0], [0.1 + 1e-9, 0.1, 0.3, 0.2]):
        assert ROCAUCMetric(y, scores).get_metric() == sk.roc_auc_score(y, scores), scores
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert np.isnan(ROCAUCMetric([1, 1], [0.2, 0.3]).get_metric())
    assert any("ROC-AUC is undefined" in str(w.message) for w in caught)
    # a score equal to the threshold is positive, for every metric and the package alike
    y, s = [1, 0, 1, 0], [0.5, 0.2, 0.9, 0.4]
    expected_f1 = sk.f1_score(y, np.asarray(s) >= 0.5)
    assert AccuracyMetric(y, s).get_metric() == 1.0
    assert F1ScoreMetric(y, s).get_metric() == expected_f1 == 1.0
    rng = np.random.default_rng(1)
    y2, s2 = rng.integers(0, 2, 97), rng.random(97).astype(np.float32)
    assert F1ScoreMetric(y2, s2).get_metric() == pytest.approx(
        sk.f1_score(y2, s2 >= 0.5), abs=1e-12
    )
    package = BinaryClassificationResultPackage(positive_class_thresh=0.5)
    result = package.prepare_result_package(y, s)
    assert result["Accuracy"] == result["accuracy"] == 1.0, result
    assert result["F1_score"] == result["f1"] == 1.0, result


def test_aitoolbox_evaluation_metadata_reaches_the_scramjet_package() -> None:
    from scramjet.compat.aitoolbox.experiment.result_package.basic_packages import (
        MetricsResultPackage,
    )
    from scramjet.metrics import ResultPackage

    class Seen(ResultPackage):
        name = "seen"

        def compute(self, y_pred, y_true, metadata=None):  # type: ignore[no-untyped-def]
            return {"ids": list(metadata["ids"]) if metadata else None}

    package = MetricsResultPackage("seen", Seen())
    # how ModelPerformanceEvaluation fills a package: the loop's metadata as additional_results
    got = package.prepare_result_package([1, 0], [0.9, 0.1], additional_results={"ids": [7, 8]})
    assert got["ids"] == [7, 8], got
    got = package.prepare_result_package([1, 0], [0.9, 0.1], metadata={"ids": [3]})
    assert got["ids"] == [3], got
