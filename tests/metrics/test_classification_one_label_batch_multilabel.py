"""A multi-label batch in which every row happens to hold one label looks one-hot: its
predictions tell it apart (per-label sigmoid probabilities, or 0/1 decisions, whose rows
do not sum to 1), so ``ClassificationResults`` refuses it as it refuses the other batches."""

from __future__ import annotations

import pytest
import torch

from scramjet.metrics import ClassificationResults

ONE_LABEL_EACH = torch.tensor([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 1, 0]])
SEVERAL = torch.tensor([[1, 1, 0], [0, 1, 0], [0, 0, 1], [1, 0, 1]])
SIGMOID = torch.tensor([[0.9, 0.6, 0.1], [0.2, 0.7, 0.3], [0.1, 0.2, 0.8], [0.7, 0.1, 0.9]])


@pytest.mark.parametrize(
    "scores", [SIGMOID, (SIGMOID > 0.5).long()], ids=["probabilities", "decisions"]
)
def test_a_multi_label_batch_is_refused_whatever_its_targets_hold(scores: torch.Tensor) -> None:
    for target in (SEVERAL, ONE_LABEL_EACH):  # the second batch used to be scored
        with pytest.raises(ValueError, match=r"multi-label.*MultiLabelResults"):
            ClassificationResults()(scores, target)


def test_softmax_probabilities_with_one_hot_targets_are_one_class_per_sample() -> None:
    scores = SIGMOID.softmax(dim=-1).half()
    out = ClassificationResults()(scores, ONE_LABEL_EACH)
    want = float((scores.argmax(-1) == ONE_LABEL_EACH.argmax(-1)).float().mean())
    assert out["accuracy"] == pytest.approx(want)
    logits = ClassificationResults()(SIGMOID * 5 - 2, ONE_LABEL_EACH)  # logits: multi-class
    assert logits["accuracy"] == pytest.approx(0.75)
