from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn import metrics as skm
from torch.utils.data import TensorDataset

from scramjet import Trainer
from scramjet.metrics import (
    BinaryResults,
    BleuResults,
    ClassificationResults,
    PerplexityResults,
    QAResults,
    RegressionResults,
    RougeResults,
    lcs_length,
    perplexity_from_loss,
    rouge_l,
    rouge_n,
)


@pytest.fixture()
def rng() -> np.random.Generator:
    return np.random.default_rng(7)


def test_classification_matches_sklearn(rng: np.random.Generator) -> None:
    logits = torch.tensor(rng.normal(size=(300, 4)), dtype=torch.float32)
    target = torch.tensor(rng.integers(0, 4, 300))
    pred = logits.argmax(1).numpy()
    out = ClassificationResults()(logits, target)
    y = target.numpy()
    assert out["accuracy"] == pytest.approx(skm.accuracy_score(y, pred), abs=1e-6)
    for avg in ("macro", "micro"):
        assert out[f"precision_{avg}"] == pytest.approx(
            skm.precision_score(y, pred, average=avg), abs=1e-6
        )
        assert out[f"recall_{avg}"] == pytest.approx(
            skm.recall_score(y, pred, average=avg), abs=1e-6
        )
        assert out[f"f1_{avg}"] == pytest.approx(skm.f1_score(y, pred, average=avg), abs=1e-6)
    assert out["confusion_matrix"] == skm.confusion_matrix(y, pred).tolist()


def test_binary_matches_sklearn(rng: np.random.Generator) -> None:
    y = rng.integers(0, 2, 400)
    scores = np.clip(y * 0.3 + rng.uniform(size=400) * 0.7, 0, 1).astype(np.float32)
    out = BinaryResults()(torch.tensor(scores), torch.tensor(y))
    assert out["accuracy"] == pytest.approx(skm.accuracy_score(y, scores > 0.5), abs=1e-6)
    assert out["roc_auc"] == pytest.approx(skm.roc_auc_score(y, scores), abs=1e-5)
    assert out["pr_auc"] == pytest.approx(skm.average_precision_score(y, scores), abs=1e-5)
    assert out["f1"] == pytest.approx(skm.f1_score(y, scores > 0.5), abs=1e-6)


def test_regression_matches_sklearn_and_packages_combine(rng: np.random.Generator) -> None:
    y = rng.normal(size=200).astype(np.float32)
    p = (y + rng.normal(scale=0.3, size=200)).astype(np.float32)
    out = (RegressionResults() + RegressionResults())(torch.tensor(p), torch.tensor(y))
    assert out["mse"] == pytest.approx(skm.mean_squared_error(y, p), rel=1e-5)
    assert out["mae"] == pytest.approx(skm.mean_absolute_error(y, p), rel=1e-5)
    assert out["r2"] == pytest.approx(skm.r2_score(y, p), rel=1e-5)
    both = (ClassificationResults() + BinaryResults())(
        torch.tensor([0.9, 0.2, 0.7]), torch.tensor([1, 0, 0])
    )
    assert {"roc_auc", "confusion_matrix"} <= set(both)


def test_rouge_against_hand_computed_values() -> None:
    pred, ref = "the cat sat on the mat", "the cat was on the mat"
    # unigrams: pred {the:2, cat, sat, on, mat}, ref {the:2, cat, was, on, mat}: overlap 5 of 6 each
    assert rouge_n(pred, ref, 1) == pytest.approx((5 / 6, 5 / 6, 5 / 6))
    # bigrams: pred {the cat, cat sat, sat on, on the, the mat}; ref shares the cat, on the, the mat
    assert rouge_n(pred, ref, 2) == pytest.approx((3 / 5, 3 / 5, 3 / 5))
    # LCS: the cat on the mat = 5 tokens
    assert lcs_length(["a", "b", "c", "d"], ["a", "c", "d", "b"]) == 3
    p, r, f = rouge_l("police killed the gunman", "police kill the gunman")
    assert (p, r) == pytest.approx((3 / 4, 3 / 4)) and f == pytest.approx(0.75)
    p, r, f = rouge_l("the gunman kill police", "police kill the gunman")
    assert (p, r) == pytest.approx((2 / 4, 2 / 4))  # LCS "the gunman"
    out = RougeResults()([pred, "Hello, World!"], [ref, ["nothing", "hello world"]])
    assert out["rouge1_f1"] == pytest.approx((5 / 6 + 1.0) / 2)
    assert out["rougeL_recall"] == pytest.approx((5 / 6 + 1.0) / 2)


def test_bleu_and_perplexity_match_torchmetrics_and_definitions() -> None:
    from torchmetrics.text import BLEUScore

    preds = ["the cat is on the mat", "there is a dog in the garden"]
    refs = [["the cat sits on the mat", "a cat is on the mat"], ["a dog is in the garden"]]
    assert BleuResults()(preds, refs)["bleu"] == pytest.approx(float(BLEUScore()(preds, refs)))
    assert BleuResults()(["a b c d e"], [["a b c d e"]])["bleu"] == pytest.approx(1.0)
    torch.manual_seed(0)
    logits, target = torch.randn(3, 5, 11), torch.randint(0, 11, (3, 5))
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, 11), target.reshape(-1))
    assert PerplexityResults()(logits, target)["perplexity"] == pytest.approx(
        math.exp(float(ce)), rel=1e-5
    )
    assert perplexity_from_loss(ce) == pytest.approx(math.exp(float(ce)))
    with pytest.raises(ValueError, match=r"logits \[N, T, V\]"):
        PerplexityResults()(torch.randn(3, 11), target)


def test_qa_exact_match_and_f1_by_hand() -> None:
    out = QAResults()(
        ["The cat", "Paris", "blue sky"], [["a cat sat"], "paris", ["red sky", "grey"]]
    )
    # EM after normalisation (lower case, no articles/punctuation): only "Paris" matches
    assert out["exact_match"] == pytest.approx(1 / 3)
    # F1: "cat" vs "cat sat" = 2/3; "paris" = 1; "blue sky" vs "red sky" = 1/2
    assert out["f1"] == pytest.approx((2 / 3 + 1 + 0.5) / 3, rel=1e-5)


def test_evaluate_with_a_trainer_uses_exactly_one_prediction_per_sample() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    trainer = Trainer(
        model,
        torch.nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=(),
    )
    data = TensorDataset(torch.randn(33, 4), torch.randint(0, 3, (33,)))
    out = ClassificationResults(num_classes=3).evaluate(trainer, data, per_device_batch_size=8)
    with torch.no_grad():
        pred = model(data.tensors[0]).argmax(1)
    assert out["accuracy"] == pytest.approx(float((pred == data.tensors[1]).float().mean()))
    assert sum(map(sum, out["confusion_matrix"])) == 33


def test_bad_inputs_are_explained() -> None:
    with pytest.raises(ValueError, match="one prediction per target"):
        ClassificationResults()(torch.tensor([0, 1]), torch.tensor([0, 1, 1]))
    with pytest.raises(TypeError, match="list of strings"):
        RougeResults()("just a string", ["x"])
    with pytest.raises(ValueError, match="references"):
        BleuResults()(["a"], [["a"], ["b"]])
