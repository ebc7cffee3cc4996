"""One-hot targets ``[N, C]`` next to logits read two ways: a multi-class batch, or a
multi-label one whose rows hold one label each (a sigmoid model's logits). The two give
different scores, so ``ClassificationResults`` says so unless ``multi_label=`` states it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import sklearn.metrics as skm
import torch

from scramjet.metrics import ClassificationResults, MultiLabelResults

# a sigmoid model's logits: rows 1 and 3 predict no label or two labels (threshold 0)
LOGITS = torch.tensor([[2.0, -1.0, -3.0], [-0.5, -0.2, -4.0], [-2.0, -1.0, 1.5], [1.0, 0.5, -2.0]])
ONE_HOT = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])


def test_one_hot_targets_next_to_logits_warn_that_the_task_is_open() -> None:
    with pytest.warns(UserWarning, match=r"one-hot.*multi_label=False.*multi_label=True"):
        out = ClassificationResults()(LOGITS, ONE_HOT)
    assert out["accuracy"] == pytest.approx(0.75)  # read as one class per sample


def test_multi_label_false_reads_classes_without_a_warning() -> None:
    labels = ONE_HOT.argmax(-1).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = ClassificationResults(multi_label=False)(LOGITS, ONE_HOT.long())
        # sigmoid probabilities too: the task is stated, so rows are classes
        probs = ClassificationResults(multi_label=False)(LOGITS.sigmoid(), ONE_HOT)
    want = skm.accuracy_score(labels, LOGITS.argmax(-1).numpy())
    assert out["accuracy"] == pytest.approx(want)
    assert probs["accuracy"] == pytest.approx(want)
    soft = ONE_HOT * 0.9 + 0.1 / 3  # smoothed labels are classes: nothing to state
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ClassificationResults()(LOGITS, soft)["accuracy"] == pytest.approx(want)


def test_multi_label_true_scores_labels_as_sklearn() -> None:
    decided = (LOGITS > 0).long().numpy()
    target = ONE_HOT.long().numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = ClassificationResults(multi_label=True)(LOGITS, ONE_HOT)
    assert out == MultiLabelResults()(LOGITS, ONE_HOT)
    assert out["subset_accuracy"] == pytest.approx(skm.accuracy_score(target, decided))
    assert out["subset_accuracy"] == pytest.approx(0.5)
    f1 = skm.f1_score(target, decided, average="macro", zero_division=0)
    assert out["f1_macro"] == pytest.approx(f1)
    assert np.isfinite(out["hamming_loss"])


def test_multi_label_must_be_a_bool_or_none() -> None:
    with pytest.raises(ValueError, match=r"multi_label.*received 'yes'"):
        ClassificationResults(multi_label="yes")  # type: ignore[arg-type]
