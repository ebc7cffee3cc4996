"""AIToolbox's NLP metrics: ROUGE, SQuAD exact match and F1, BLEU, perplexity.

Everything is computed here, offline, with the definitions AIToolbox's metrics produce:

- ROUGE-1/2/L per example (n-gram overlap with multiplicity; longest common subsequence),
  ``f = 2pr / (p + r + 1e-8)``, averaged over examples.
- Exact match and F1 of SQuAD answers (lower-cased, punctuation and articles removed), in %.
- BLEU with NLTK's definition (up to 4-grams, equal weights, no smoothing, brevity penalty
  from the closest reference length): per sentence, averaged, or over the corpus.
- BLEU as the Moses ``multi-bleu.perl`` script prints it (in %, two decimals), per
  example and averaged, as AIToolbox's torchnlp-based metric reported it.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from scramjet.compat.aitoolbox.experiment.core_metrics.abstract_metric import AbstractBaseMetric
from scramjet.metrics import lcs_length

__all__ = [
    "BLEUCorpusScoreMetric",
    "BLEUScoreStrTorchNLPMetric",
    "BLEUSentenceScoreMetric",
    "ExactMatchTextMetric",
    "F1TextMetric",
    "PerplexityMetric",
    "ROUGEMetric",
]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def _check_pairs(y_true: Sequence[Any], y_predicted: Sequence[Any], metric: str) -> None:
    if len(y_true) != len(y_predicted):
        raise ValueError(
            f"{metric} needs one prediction per target; received {len(y_true)} targets and "
            f"{len(y_predicted)} predictions."
        )


def _text(tokens: Any) -> str:
    return tokens if isinstance(tokens, str) else " ".join(str(t) for t in tokens)


def _ngrams(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def _rouge_prf(overlap: int, n_pred: int, n_ref: int) -> dict[str, float]:
    p = overlap / n_pred if n_pred else 0.0
    r = overlap / n_ref if n_ref else 0.0
    return {"f": 2.0 * ((p * r) / (p + r + 1e-8)), "p": p, "r": r}


def rouge_scores(prediction: str, reference: str) -> dict[str, dict[str, float]]:
    """ROUGE-1, ROUGE-2 and ROUGE-L of one prediction (whitespace tokens)."""
    pred, ref = prediction.split(), reference.split()
    scores = {}
    for n in (1, 2):
        p_grams, r_grams = _ngrams(pred, n), _ngrams(ref, n)
        overlap = sum((p_grams & r_grams).values())
        scores[f"rouge-{n}"] = _rouge_prf(overlap, sum(p_grams.values()), sum(r_grams.values()))
    scores["rouge-l"] = _rouge_prf(lcs_length(pred, ref), len(pred), len(ref))
    return scores


class ROUGEMetric(AbstractBaseMetric):
    """ROUGE-1/2/L (``{"rouge-1": {"f", "p", "r"}, ...}``) averaged over examples.

    Args:
        y_true: reference token lists (or strings with ``target_actual_text=True``).
        y_predicted: predicted token lists.
        target_actual_text: ``y_true`` holds strings, not token lists.
        output_text_dir: accepted for AIToolbox compatibility; nothing is written.
    """

    def __init__(
        self,
        y_true: Sequence[Any],
        y_predicted: Sequence[Any],
        target_actual_text: bool = False,
        output_text_dir: str | None = None,
    ) -> None:
        _check_pairs(y_true, y_predicted, "ROUGE")
        self.target_actual_text = target_actual_text
        self.output_text_dir = output_text_dir
        super().__init__(list(y_true), list(y_predicted), metric_name="ROGUE", np_array=False)

    def calculate_metric(self) -> dict[str, dict[str, float]]:
        """Per-example scores, averaged."""
        per_example = [
            rouge_scores(_text(pred), _text(ref))
            for ref, pred in zip(self.y_true, self.y_predicted, strict=True)
        ]
        if not per_example:
            return {}
        return {
            kind: {
                part: sum(s[kind][part] for s in per_example) / len(per_example)
                for part in ("f", "p", "r")
            }
            for kind in per_example[0]
        }


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _answer_f1(prediction: str, truth: str) -> float:
    pred, gold = normalize_answer(prediction).split(), normalize_answer(truth).split()
    same = sum((Counter(pred) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return (2 * precision * recall) / (precision + recall)


class ExactMatchTextMetric(AbstractBaseMetric):
    """Percentage of predicted answers equal to the target after SQuAD normalisation."""

    def __init__(self, y_true: Sequence[Any], y_predicted: Sequence[Any]) -> None:
        _check_pairs(y_true, y_predicted, "Exact match")
        super().__init__(list(y_true), list(y_predicted), metric_name="EM", np_array=False)

    def calculate_metric(self) -> float:
        """``100 * matches / examples``."""
        matches = sum(
            float(normalize_answer(_text(p)) == normalize_answer(_text(t)))
            for t, p in zip(self.y_true, self.y_predicted, strict=True)
        )
        return 100.0 * matches / len(self.y_true) if self.y_true else 0.0


class F1TextMetric(AbstractBaseMetric):
    """Mean SQuAD token F1 of predicted answers, in percent."""

    def __init__(self, y_true: Sequence[Any], y_predicted: Sequence[Any]) -> None:
        _check_pairs(y_true, y_predicted, "F1")
        super().__init__(list(y_true), list(y_predicted), metric_name="F1", np_array=False)

    def calculate_metric(self) -> float:
        """``100 * sum(F1) / examples``."""
        total = sum(
            _answer_f1(_text(p), _text(t))
            for t, p in zip(self.y_true, self.y_predicted, strict=True)
        )
        return 100.0 * total / len(self.y_true) if self.y_true else 0.0


def _bleu_counts(hyp: Sequence[str], ref: Sequence[str], max_n: int) -> list[tuple[int, int]]:
    """Per order: (clipped matching n-grams, hypothesis n-grams)."""
    out = []
    for n in range(1, max_n + 1):
        h, r = _ngrams(hyp, n), _ngrams(ref, n)
        out.append((sum((h & r).values()), sum(h.values())))
    return out


def _bleu(counts: list[tuple[int, int]], hyp_len: int, ref_len: int) -> float:
    """Geometric mean of the precisions times the brevity penalty; 0 if any precision is 0."""
    if hyp_len == 0 or any(num == 0 for num, _ in counts):
        return 0.0
    log_p = sum(math.log(num / max(1, den)) for num, den in counts) / len(counts)
    bp = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    return bp * math.exp(log_p)


def _tokens(value: Any) -> list[str]:
    return value.split() if isinstance(value, str) else [str(t) for t in value]


class BLEUSentenceScoreMetric(AbstractBaseMetric):
    """NLTK-style sentence BLEU of each prediction against its target, averaged."""

    def __init__(self, y_true: Sequence[Any], y_predicted: Sequence[Any]) -> None:
        _check_pairs(y_true, y_predicted, "BLEU")
        super().__init__(
            list(y_true), list(y_predicted), metric_name="BLEU_sentence_score", np_array=False
        )

    def calculate_metric(self) -> float:
        """Mean sentence BLEU."""
        scores = []
        for ref, hyp in zip(self.y_true, self.y_predicted, strict=True):
            hyp_t, ref_t = _tokens(hyp), _tokens(ref)
            scores.append(_bleu(_bleu_counts(hyp_t, ref_t, 4), len(hyp_t), len(ref_t)))
        return float(np.mean(scores)) if scores else 0.0


class BLEUCorpusScoreMetric(AbstractBaseMetric):
    """NLTK-style corpus BLEU: n-gram counts and lengths summed over all examples."""

    def __init__(self, y_true: Sequence[Any], y_predicted: Sequence[Any]) -> None:
        _check_pairs(y_true, y_predicted, "BLEU")
        super().__init__(
            list(y_true), list(y_predicted), metric_name="BLEU_corpus_score", np_array=False
        )

    def calculate_metric(self) -> float:
        """Corpus BLEU."""
        totals = [[0, 0] for _ in range(4)]
        hyp_len = ref_len = 0
        for ref, hyp in zip(self.y_true, self.y_predicted, strict=True):
            hyp_t, ref_t = _tokens(hyp), _tokens(ref)
            for total, (num, den) in zip(totals, _bleu_counts(hyp_t, ref_t, 4), strict=True):
                total[0] += num
                total[1] += max(1, den)
            hyp_len, ref_len = hyp_len + len(hyp_t), ref_len + len(ref_t)
        return _bleu([(num, den) for num, den in totals], hyp_len, ref_len)


def moses_bleu(hypothesis: Sequence[str], reference: Sequence[str]) -> float:
    """BLEU in percent as ``multi-bleu.perl`` prints it (two decimals) for one pair."""
    counts = _bleu_counts(hypothesis, reference, 4)
    if not reference or not hypothesis or any(num == 0 for num, _ in counts):
        return 0.0
    log_p = sum(math.log(num / den) for num, den in counts) / 4
    bp = (
        1.0 if len(hypothesis) >= len(reference) else math.exp(1 - len(reference) / len(hypothesis))
    )
    return float(f"{100 * bp * math.exp(log_p):.2f}")


class BLEUScoreStrTorchNLPMetric(AbstractBaseMetric):
    """Moses ``multi-bleu`` BLEU (percent, float32) per example, averaged.

    Kept as AIToolbox computed it through torchnlp: the first argument is scored against
    the second. Computed here; no script is downloaded.
    """

    def __init__(self, y_true: Sequence[Any], y_predicted: Sequence[Any]) -> None:
        _check_pairs(y_true, y_predicted, "BLEU")
        super().__init__(
            list(y_true), list(y_predicted), metric_name="BLEU_str_torchNLP_score", np_array=False
        )

    def calculate_metric(self) -> float:
        """Mean of the per-example scores, in float32 as torchnlp returned them."""
        scores = [
            np.float32(moses_bleu(_tokens(t), _tokens(p)))
            for t, p in zip(self.y_true, self.y_predicted, strict=True)
        ]
        return float(np.mean(np.array(scores, dtype=np.float32))) if scores else 0.0


class PerplexityMetric(AbstractBaseMetric):
    """``exp(mean loss)`` of per-batch cross-entropy losses."""

    def __init__(self, batch_losses: Sequence[float]) -> None:
        super().__init__(list(batch_losses), None, metric_name="Perplexity", np_array=False)

    def calculate_metric(self) -> float:
        """``exp(mean(batch_losses))``."""
        if not self.y_true:
            raise ValueError("PerplexityMetric needs at least one batch loss; received none.")
        return float(math.exp(float(np.mean([float(x) for x in self.y_true]))))
