"""Questions without an answer (SQuAD v2), and references left empty by mistake.

SQuAD v2's official script scores a question whose gold answers are an empty list as
answered right by an empty prediction (exact match 1, F1 1) and wrong by any other."""

from __future__ import annotations

import pytest

from scramjet.metrics import BleuResults, QAResults, ResultPackage, RougeResults


def test_unanswerable_questions_score_as_squad_v2_does() -> None:
    preds = ["", "Paris", "London", "the Seine river"]
    golds: list[list[str]] = [[], ["paris"], [], ["Seine", "the Seine"]]

    scores = QAResults().compute(preds, golds)

    # abstained right, exact, answered an unanswerable one, one word too many
    assert scores["exact_match"] == pytest.approx(2 / 4)
    # "seine river" against "seine": precision 1/2, recall 1 → F1 2/3
    assert scores["f1"] == pytest.approx((1 + 1 + 0 + 2 / 3) / 4)


@pytest.mark.parametrize("package", [RougeResults(), BleuResults()], ids=["rouge", "bleu"])
def test_a_prediction_without_reference_is_named(package: ResultPackage) -> None:
    with pytest.raises(ValueError, match=r"y_true\[1\] holds no reference text"):
        package.compute(["a cat", "a dog"], [["a cat"], []])
