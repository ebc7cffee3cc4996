"""An AIToolbox code base run with only its imports changed: what it reads must be there."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from scramjet.compat.aitoolbox.experiment.result_package.basic_packages import (
    BinaryClassificationResultPackage,
    RegressionResultPackage,
)


def test_binary_package_results_keep_aitoolbox_metric_keys() -> None:
    y_true = torch.tensor([1, 0, 1, 1, 0])
    scores = torch.tensor([0.9, 0.4, 0.2, 0.8, 0.6])
    results = BinaryClassificationResultPackage().prepare_result_package(y_true, scores)
    assert results["Accuracy"] == pytest.approx(0.6)
    assert results["ROC_AUC"] == pytest.approx(results["roc_auc"])
    assert results["PrecisionRecall_AUC"] == pytest.approx(0.85)  # auc(recall, precision)
    assert results["pr_auc"] == pytest.approx(0.8666666)  # the average precision
    assert results["F1_score"] == pytest.approx(results["f1"])
    assert results["accuracy"] == results["Accuracy"]


def test_regression_package_results_keep_aitoolbox_metric_keys() -> None:
    y_true, y_pred = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.5, 2.0, 2.0])
    results = RegressionResultPackage().prepare_result_package(y_true, y_pred)
    assert results["Mean_squared_error"] == pytest.approx((0.25 + 1.0) / 3)
    assert results["Mean_absolute_error"] == pytest.approx(1.5 / 3)
    assert results["mse"] == results["Mean_squared_error"]


def test_general_package_keeps_aitoolbox_package_name() -> None:
    from scramjet.compat.aitoolbox.experiment.core_metrics.classification import AccuracyMetric
    from scramjet.compat.aitoolbox.experiment.result_package.basic_packages import (
        GeneralResultPackage,
    )

    general = GeneralResultPackage([AccuracyMetric])
    # the name keys the package's results in saved experiments (``<name>_VAL``) and in ``a + b``
    assert general.pkg_name == "GeneralResultPackage"
    general.prepare_result_package([1, 0], [1, 1])
    reg = RegressionResultPackage()
    reg.prepare_result_package(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]))
    assert set((general + reg).get_results()) == {"GeneralResultPackage", "RegressionResult"}


def test_regression_package_scores_a_single_sample() -> None:
    results = RegressionResultPackage().prepare_result_package(
        torch.tensor([1.0]), torch.tensor([3.0])
    )
    assert results["Mean_squared_error"] == pytest.approx(4.0)
    assert results["Mean_absolute_error"] == pytest.approx(2.0)


def _tiny_loop_parts(n: int = 24, batch: int = 8) -> tuple[Any, Any, Any]:
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from scramjet.compat.aitoolbox.torchtrain.model import TTModel

    class Reg(TTModel):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(x)

        def get_loss(self, batch: Any, criterion: Any, device: Any) -> torch.Tensor:
            x, y = batch
            return criterion(self(x.to(device)), y.to(device))

        def get_predictions(self, batch: Any, device: Any) -> tuple[Any, Any, Any]:
            x, y = batch
            return self(x.to(device)).cpu(), y, {}

    gen = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(n, 3, generator=gen), torch.randn(n, 1, generator=gen))
    torch.manual_seed(0)
    model = Reg()
    return model, DataLoader(data, batch_size=batch), torch.optim.SGD(model.parameters(), lr=0.1)


def test_loop_keeps_the_epochs_batch_losses_in_loss_batch_accum() -> None:
    from torch import nn

    from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import AbstractCallback
    from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoop

    seen: list[list[float]] = []

    class Watch(AbstractCallback):
        def __init__(self) -> None:
            super().__init__("watch")

        def on_batch_end(self) -> None:
            seen.append(list(self.train_loop_obj.loss_batch_accum))

    model, loader, opt = _tiny_loop_parts()
    loop = TrainLoop(model, loader, None, None, opt, nn.MSELoss(), end_auto_eval=False)
    loop.fit(num_epochs=2, callbacks=[Watch()])
    # a callback reads the batch losses so far in the epoch; a new epoch starts a new list
    assert [len(s) for s in seen] == [1, 2, 3, 1, 2, 3]
    assert seen[2][:2] == seen[1] and seen[5][:2] == seen[4]
    last = loop.train_history["accumulated_loss"][-1]
    assert sum(loop.loss_batch_accum) / 3 == pytest.approx(last)  # equal batches: the mean


def test_loss_batch_accum_holds_undivided_losses_with_grad_accumulation() -> None:
    from torch import nn

    from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoop

    model, loader, opt = _tiny_loop_parts(n=32)
    loop = TrainLoop(model, loader, None, None, opt, nn.MSELoss(), end_auto_eval=False)
    loop.fit(num_epochs=1, grad_accumulation=2)
    assert len(loop.loss_batch_accum) == 4
    mean = sum(loop.loss_batch_accum) / 4
    assert mean == pytest.approx(loop.train_history["accumulated_loss"][-1])


def test_tensorboard_full_tracking_writes_into_the_experiment_folder(tmp_path: Any) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch import nn

    from scramjet.compat.aitoolbox.torchtrain.callbacks.tensorboard import (
        TensorboardFullTracking,
    )
    from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoopCheckpoint

    model, loader, opt = _tiny_loop_parts()
    loop = TrainLoopCheckpoint(
        model, loader, loader, None, opt, nn.MSELoss(), "proj", "exp", str(tmp_path),
        hyperparams={}, cloud_save_mode=None,
    )  # fmt: skip
    loop.fit(num_epochs=2, callbacks=[TensorboardFullTracking(batch_log_frequency=2)])
    log_dir = tmp_path / "proj" / f"exp_{loop.experiment_timestamp}" / "tensorboard"
    events = EventAccumulator(str(log_dir))
    events.Reload()
    val = events.Scalars("loss/val_loss")
    assert [e.step for e in val] == [0, 1]
    assert [e.value for e in val] == pytest.approx(loop.train_history["val_loss"])
    assert [e.step for e in events.Scalars("train_loss/last_batch_loss")] == [0, 2, 4]


def test_predicting_on_a_missing_test_loader_names_the_loader() -> None:
    from torch import nn

    from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoop

    model, loader, opt = _tiny_loop_parts()
    loop = TrainLoop(model, loader, loader, None, opt, nn.MSELoss())
    with pytest.raises(ValueError, match=r"test_loader is None.*pass a test_loader"):
        loop.predict_on_test_set()
    with pytest.raises(ValueError, match="test_loader is None"):
        loop.evaluate_loss_on_test_set()


def test_question_answer_package_takes_paragraphs_and_predicted_spans() -> None:
    from scramjet.compat.aitoolbox.nlp.experiment_evaluation.NLP_result_package import (
        QuestionAnswerResultPackage,
    )

    paragraphs = [
        ["the", "cat", "sat", "on", "the", "mat"],
        ["a", "dog", "ran", "home", "fast"],
    ]
    true_spans = torch.tensor([[1, 2], [1, 3]])  # "cat sat", "dog ran home" (inclusive ends)
    pred_spans = torch.tensor([[1, 2], [1, 1]])  # "cat sat", "dog"
    package = QuestionAnswerResultPackage(paragraphs)
    results = package.prepare_result_package(true_spans, pred_spans)
    assert results["EM"] == pytest.approx(50.0)
    assert results["F1"] == pytest.approx(100 * (1 + 0.5) / 2)
    assert set(results["ROGUE"]) == {"rouge-1", "rouge-2", "rouge-l"}

    actual = QuestionAnswerResultPackage(paragraphs, target_actual_text=["cat sat", "dog"])
    assert actual.prepare_result_package(true_spans, pred_spans)["EM"] == pytest.approx(100.0)
    flat = QuestionAnswerResultPackage(paragraphs, flatten_result_dict=True)
    assert "ROGUE_rouge-1_f" in flat.prepare_result_package(true_spans, pred_spans)
    with pytest.raises(ValueError, match="paragraph_text_tokens"):
        QuestionAnswerResultPackage(paragraphs, target_actual_text=["one"])


def test_machine_translation_package_takes_a_target_vocabulary_and_index_sentences() -> None:
    import math

    from scramjet.compat.aitoolbox.nlp.core.vocabulary import Vocabulary
    from scramjet.compat.aitoolbox.nlp.experiment_evaluation.NLP_result_package import (
        MachineTranslationResultPackage,
    )

    vocab = Vocabulary("target")
    for sentence in ["the cat sat on the mat", "a dog ran home today"]:
        vocab.add_sentence(sentence.split())
    ids = [[vocab.word2index[w] for w in s.split()] for s in ["the cat sat on the mat", "a dog ran home today"]]  # fmt: skip
    eos = vocab.EOS_token
    package = MachineTranslationResultPackage(vocab)
    results = package.prepare_result_package(
        [[*row, eos] for row in ids], [[*row, eos] for row in ids],
        additional_results={"loss": [math.log(2.0), math.log(2.0)]},
    )  # fmt: skip
    assert results["BLEU_corpus_score"] == pytest.approx(1.0)
    assert results["BLEU_sentence_score"] == pytest.approx(1.0)
    assert results["Perplexity"] == pytest.approx(2.0)
    words = ["the", "cat", "sat", "on", "the", "mat"]
    assert package.y_predicted_text[0] == words  # EOS removed
