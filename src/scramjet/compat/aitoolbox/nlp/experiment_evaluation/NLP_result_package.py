"""AIToolbox's NLP result packages, computed by :mod:`scramjet.metrics`."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from scramjet import metrics as M
from scramjet.compat.aitoolbox.experiment.result_package.basic_packages import (
    MetricsResultPackage,
)

__all__ = [
    "MachineTranslationResultPackage",
    "PerplexityResultPackage",
    "QuestionAnswerResultPackage",
    "TextSummarizationResultPackage",
]


class QuestionAnswerResultPackage(MetricsResultPackage):
    """Question answering: SQuAD exact match and F1, and ROUGE-1/2/L of the answers.

    Given ``paragraph_text_tokens`` (AIToolbox's form), ``y_true`` and ``y_predicted`` are
    answer spans ``[N, 2]`` (start and inclusive end token of each example's paragraph) and
    the results are AIToolbox's: ``ROGUE`` (ROUGE scores), ``EM`` and ``F1`` (percent).
    Without it, ``y_true`` and ``y_predicted`` are the answer texts and the results are
    scramjet's (``exact_match``, ``f1``, ``rouge*``).

    Args:
        paragraph_text_tokens: one token list per example, the text the spans index.
        target_actual_text: the true answers as text (then ``y_true`` is not read).
        output_text_dir: accepted for compatibility (no text files are written).
        use_perl_rouge: the Perl ROUGE-1.5.5 is not provided; True is refused.
        flatten_result_dict: flatten the nested ROUGE results (``ROGUE_rouge-1_f``, ...).
        strict_content_check: see :class:`AbstractResultPackage`.
    """

    def __init__(
        self,
        paragraph_text_tokens: list[list[Any]] | None = None,
        target_actual_text: list[str] | None = None,
        output_text_dir: str | None = None,
        use_perl_rouge: bool = False,
        flatten_result_dict: bool = False,
        strict_content_check: bool = False,
        **kwargs: Any,
    ) -> None:
        if use_perl_rouge:
            raise ValueError(
                "use_perl_rouge=True asks for the Perl ROUGE-1.5.5, which is not provided; "
                "leave use_perl_rouge=False for the ROUGE scores computed here."
            )
        if target_actual_text is not None and (
            paragraph_text_tokens is None or len(target_actual_text) != len(paragraph_text_tokens)
        ):
            count = None if paragraph_text_tokens is None else len(paragraph_text_tokens)
            raise ValueError(
                f"target_actual_text needs one answer per paragraph of paragraph_text_tokens; "
                f"received {len(target_actual_text)} answers and {count} paragraphs."
            )
        package = M.QAResults() + M.RougeResults()
        super().__init__("QuestionAnswerResult", package, strict_content_check)
        self.paragraph_text_tokens = (
            None
            if paragraph_text_tokens is None
            else [[str(w) for w in paragraph] for paragraph in paragraph_text_tokens]
        )
        self.target_actual_text = target_actual_text
        self.output_text_dir = output_text_dir
        self.flatten_result_dict = flatten_result_dict

    def prepare_results_dict(self) -> dict[str, Any]:
        """Answer texts from the spans, then AIToolbox's ROUGE, EM and F1 (see the class)."""
        if self.paragraph_text_tokens is None:
            return super().prepare_results_dict()
        from scramjet.compat.aitoolbox.nlp.experiment_evaluation.NLP_metrics import (
            ExactMatchTextMetric,
            F1TextMetric,
            ROUGEMetric,
        )
        from scramjet.compat.aitoolbox.utils.dict_util import flatten_dict

        predicted = self._span_texts(self.y_predicted, "y_predicted")
        actual = self.target_actual_text is not None
        truth: list[Any] = (
            list(self.target_actual_text or [])
            if actual
            else self._span_texts(self.y_true, "y_true")
        )
        results: dict[str, Any] = {}
        for metric in (
            ROUGEMetric(truth, predicted, target_actual_text=actual),
            ExactMatchTextMetric(truth, predicted),
            F1TextMetric(truth, predicted),
        ):
            results.update(metric.get_metric_dict())
        return flatten_dict(results) if self.flatten_result_dict else results

    def _span_texts(self, spans: Any, name: str) -> list[list[str]]:
        """Each example's ``[start, end]`` span cut from its paragraph's tokens."""
        rows = torch.as_tensor(np.asarray(spans)).long()
        paragraphs = self.paragraph_text_tokens or []
        if rows.dim() != 2 or rows.shape[1] != 2 or rows.shape[0] != len(paragraphs):
            raise ValueError(
                f"{name} must hold one [start, end] token span per paragraph, shape "
                f"[{len(paragraphs)}, 2]; received shape {list(rows.shape)}. Return the "
                f"predicted start and end token indices from get_predictions."
            )
        return [p[int(a) : int(b) + 1] for (a, b), p in zip(rows.tolist(), paragraphs, strict=True)]


class TextSummarizationResultPackage(MetricsResultPackage):
    """ROUGE-1/2/L."""

    def __init__(self, strict_content_check: bool = False, **kwargs: Any) -> None:
        super().__init__("TextSummarizationResult", M.RougeResults(), strict_content_check)


class MachineTranslationResultPackage(MetricsResultPackage):
    """Machine translation: BLEU.

    Given ``target_vocab`` (AIToolbox's form), ``y_true`` and ``y_predicted`` are sentences
    of target-vocabulary indices; they are turned into words (PAD/SOS/EOS dropped, kept in
    ``y_true_text``/``y_predicted_text``) and the results are AIToolbox's:
    ``BLEU_corpus_score``, ``BLEU_sentence_score`` and, when ``prepare_result_package`` gets
    ``additional_results={"loss": [batch losses]}``, ``Perplexity``. Without it,
    ``y_true``/``y_predicted`` are texts and the result is scramjet's corpus ``bleu``.

    Args:
        target_vocab: the target language's ``Vocabulary``.
        source_vocab, source_sents, output_text_dir, output_attn_heatmap_dir: accepted for
            compatibility (no text or heatmap files are written here; the attention
            heatmaps come from ``AttentionHeatmapCallback``).
        strict_content_check: see :class:`AbstractResultPackage`.
        n_gram, smooth: BLEU's largest n-gram and smoothing for the text form.
    """

    def __init__(
        self,
        target_vocab: Any = None,
        source_vocab: Any = None,
        source_sents: list[Any] | None = None,
        output_text_dir: str | None = None,
        output_attn_heatmap_dir: str | None = None,
        strict_content_check: bool = False,
        n_gram: int = 4,
        smooth: bool = False,
        **kwargs: Any,
    ) -> None:
        if target_vocab is not None and not hasattr(target_vocab, "convert_idx_sent2sent"):
            raise TypeError(
                f"target_vocab must be a Vocabulary (with convert_idx_sent2sent); received "
                f"{type(target_vocab).__name__}. For texts leave it out; BLEU's n-gram order "
                f"is n_gram=..."
            )
        package = M.BleuResults(n_gram, smooth)
        super().__init__("MachineTranslationResult", package, strict_content_check)
        self.target_vocab, self.source_vocab = target_vocab, source_vocab
        self.source_sents, self.output_text_dir = source_sents, output_text_dir
        self.output_attn_heatmap_dir = output_attn_heatmap_dir
        self.y_true_text: list[list[str]] | None = None
        self.y_predicted_text: list[list[str]] | None = None

    def prepare_results_dict(self) -> dict[str, Any]:
        """Index sentences to words, then AIToolbox's BLEU scores (see the class)."""
        if self.target_vocab is None:
            return super().prepare_results_dict()
        from scramjet.compat.aitoolbox.nlp.experiment_evaluation.NLP_metrics import (
            BLEUCorpusScoreMetric,
            BLEUSentenceScoreMetric,
            PerplexityMetric,
        )

        def words(sentences: Any) -> list[list[str]]:
            rows = sentences.tolist() if hasattr(sentences, "tolist") else sentences
            return [
                self.target_vocab.convert_idx_sent2sent(
                    [int(i) for i in row], rm_default_tokens=True
                )
                for row in rows
            ]

        self.y_true_text, self.y_predicted_text = words(self.y_true), words(self.y_predicted)
        results: dict[str, Any] = {}
        results.update(
            BLEUCorpusScoreMetric(self.y_true_text, self.y_predicted_text).get_metric_dict()
        )
        results.update(
            BLEUSentenceScoreMetric(self.y_true_text, self.y_predicted_text).get_metric_dict()
        )
        extra = (self.additional_results or {}).get("additional_results") or {}
        if "loss" in extra:
            results.update(PerplexityMetric(list(extra["loss"])).get_metric_dict())
        return results


class PerplexityResultPackage(MetricsResultPackage):
    """Perplexity from token logits and targets."""

    def __init__(
        self, ignore_index: int | None = None, strict_content_check: bool = False, **kwargs: Any
    ) -> None:
        package = M.PerplexityResults(ignore_index)
        super().__init__("PerplexityResult", package, strict_content_check)
