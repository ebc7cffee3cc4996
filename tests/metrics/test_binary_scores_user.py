"""BinaryResults: a model's logits that happen to lie in [0, 1] are scored as logits
when the user says so."""

from __future__ import annotations

import pytest
import torch
from sklearn.metrics import accuracy_score, f1_score, roc_auc_score

from scramjet.metrics import BinaryResults

LOGITS = torch.tensor([0.1, 0.3, 0.6, 0.9, 0.2, 0.05])  # an early model's: all in [0, 1]
TARGET = torch.tensor([1, 1, 1, 1, 1, 0])


def test_logits_in_zero_one_are_scored_as_logits_when_told() -> None:
    result = BinaryResults(scores="logits").compute(LOGITS, TARGET)
    decided = (LOGITS > 0).long().numpy()  # a logit above 0 is a probability above 0.5
    assert result["accuracy"] == pytest.approx(accuracy_score(TARGET.numpy(), decided))
    assert result["accuracy"] == pytest.approx(5 / 6)
    # read from its values, the same output is taken for probabilities (threshold 0.5)
    assert BinaryResults().compute(LOGITS, TARGET)["accuracy"] == pytest.approx(3 / 6)
    assert result["f1"] == pytest.approx(f1_score(TARGET.numpy(), decided))
    assert result["roc_auc"] == pytest.approx(roc_auc_score(TARGET.numpy(), LOGITS.numpy()))


def test_probabilities_outside_zero_one_are_refused_when_promised() -> None:
    logits = torch.tensor([0.1, 0.3, 0.6, 0.9, -0.2, -1.5])
    with pytest.raises(ValueError, match=r"2 value\(s\) outside \[0, 1\].*scores='logits'"):
        BinaryResults(scores="probabilities").compute(logits, TARGET)
    probs = LOGITS.sigmoid()
    same = BinaryResults(scores="probabilities").compute(probs, TARGET)
    assert same == BinaryResults().compute(probs, TARGET)


def test_two_scores_per_sample_are_not_squashed_twice() -> None:
    two = torch.stack([torch.zeros(6), LOGITS], dim=1)  # softmax [:, 1] == sigmoid(LOGITS)
    assert BinaryResults(scores="logits").compute(two, TARGET)["accuracy"] == pytest.approx(5 / 6)


def test_a_misspelled_scores_value_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="received 'logit'"):
        BinaryResults(scores="logit")  # type: ignore[arg-type]


def test_macro_averages_leave_out_classes_that_never_show() -> None:
    # The documented convention: a fourth class, neither a target nor ever predicted,
    # has its confusion-matrix row but does not pull the macro averages down.
    from sklearn import metrics as skm

    from scramjet.metrics import ClassificationResults

    scores = torch.tensor([[3.0, 1, 0, 0], [0, 3, 1, 0], [1, 0, 3, 0], [3, 0, 0, 1], [0, 0, 3, 1]])
    target = torch.tensor([0, 1, 2, 0, 1])
    result = ClassificationResults().compute(scores, target)
    pred = scores.argmax(dim=1).numpy()
    assert len(result["confusion_matrix"]) == 4
    assert result["f1_macro"] == pytest.approx(skm.f1_score(target, pred, average="macro"))
    assert result["recall_macro"] == pytest.approx(skm.recall_score(target, pred, average="macro"))
    four = skm.f1_score(target, pred, average="macro", labels=[0, 1, 2, 3], zero_division=0)
    assert result["f1_macro"] != pytest.approx(four)
