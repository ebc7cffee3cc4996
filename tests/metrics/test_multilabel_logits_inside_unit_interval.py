"""MultiLabelResults takes ``scores=`` as BinaryResults does: logits that all lie in [0, 1]
(an untrained model's) were read as probabilities, thresholded at 0.5 instead of 0."""

from __future__ import annotations

import pytest
import sklearn.metrics as skm
import torch

from scramjet.metrics import MultiLabelResults

LOGITS = torch.tensor([[0.3, 0.8, 0.1], [0.6, 0.2, 0.9], [0.05, 0.7, 0.4]])
TARGET = torch.tensor([[1, 1, 0], [1, 1, 1], [0, 1, 1]])


def test_stated_logits_inside_the_unit_interval_go_through_a_sigmoid() -> None:
    decided = (LOGITS > 0).long()
    out = MultiLabelResults(scores="logits")(LOGITS, TARGET)
    assert out["subset_accuracy"] == pytest.approx(skm.accuracy_score(TARGET, decided))
    assert out["hamming_loss"] == pytest.approx(skm.hamming_loss(TARGET, decided))
    f1 = skm.f1_score(TARGET, decided, average="micro", zero_division=0)
    assert out["f1_micro"] == pytest.approx(f1)
    # read as probabilities (the default), the same values are decided at 0.5
    auto = MultiLabelResults()(LOGITS, TARGET)
    assert auto["hamming_loss"] == pytest.approx(skm.hamming_loss(TARGET, (LOGITS > 0.5).long()))


def test_stated_probabilities_refuse_values_outside_the_unit_interval() -> None:
    with pytest.raises(ValueError, match=r"outside \[0, 1\].*scores='logits'"):
        MultiLabelResults(scores="probabilities")(LOGITS * 4 - 1, TARGET)
    with pytest.raises(ValueError, match=r"scores must be.*received 'logit'"):
        MultiLabelResults(scores="logit")  # type: ignore[arg-type]
