"""NLP result packages: BLEU, ROUGE-1/2/L, perplexity, question answering (EM / F1).

Perplexity and the QA scores come from torchmetrics. BLEU is counted here with
torchmetrics' conventions (its smoothing gives 0 whenever an n-gram order has no match).
torchmetrics' ROUGE needs nltk, so ROUGE-N and ROUGE-L are computed here: lower-cased
tokens of letters and digits of any script (see :func:`tokenize`), n-gram overlap counted
with multiplicity (ROUGE-N) and the longest common subsequence (ROUGE-L); precision, recall
and F1 per pair, averaged over pairs. With several references per prediction, the best-scoring reference counts.
"""

from __future__ import annotations

import math
import re
import unicodedata
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch

from scramjet.metrics.base import ResultPackage, as_tensor, warn_if_unshifted
from scramjet.runtime.stacklevel import user_stacklevel
from scramjet.trainer.batch import PAD_VALUE

#: Chinese and Japanese characters (kana, CJK ideographs): no spaces separate their words,
#: so each is a token of its own.
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def tokenize(text: str) -> list[str]:
    """Lower-cased runs of letters and digits of any script; each Chinese or Japanese
    character is a token of its own (those scripts put no spaces between words). Marks
    (accents, the vowel signs of Indic scripts) stay in their word. The text is first put
    in Unicode's composed form (NFC), so an accent written as a letter plus a combining
    mark (``e`` + U+0301) is the same as the accented letter (U+00E9)."""
    tokens: list[str] = []
    word: list[str] = []
    for char in unicodedata.normalize("NFC", text).lower():
        if unicodedata.category(char)[0] in "LNM" and not _CJK.match(char):
            word.append(char)
            continue
        if word:
            tokens.append("".join(word))
            word = []
        if _CJK.match(char):
            tokens.append(char)
    if word:
        tokens.append("".join(word))
    return tokens


def _prf(overlap: int, n_pred: int, n_ref: int) -> tuple[float, float, float]:
    p = overlap / n_pred if n_pred else 0.0
    r = overlap / n_ref if n_ref else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def rouge_n(prediction: str, reference: str, n: int) -> tuple[float, float, float]:
    """ROUGE-N precision, recall and F1 of one pair."""

    def grams(tokens: list[str]) -> Counter[tuple[str, ...]]:
        return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))

    p_grams, r_grams = grams(tokenize(prediction)), grams(tokenize(reference))
    overlap = sum((p_grams & r_grams).values())
    return _prf(overlap, sum(p_grams.values()), sum(r_grams.values()))


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (O(len(a)·len(b)) time, O(len(b)) memory)."""
    row = [0] * (len(b) + 1)
    for x in a:
        prev_diag = 0
        for j, y in enumerate(b, start=1):
            keep = row[j]
            row[j] = prev_diag + 1 if x == y else max(row[j], row[j - 1])
            prev_diag = keep
    return row[-1]


def rouge_l(prediction: str, reference: str) -> tuple[float, float, float]:
    """ROUGE-L precision, recall and F1 of one pair."""
    p, r = tokenize(prediction), tokenize(reference)
    return _prf(lcs_length(p, r), len(p), len(r))


_DECODE_HINT = (
    "Text metrics compare texts: decode token ids first (e.g. tokenizer.batch_decode(ids, "
    "skip_special_tokens=True)) and call package.compute(texts, references); evaluate(trainer, "
    "dataset) gives the model's raw output (logits), not texts."
)


def _described(value: Any) -> str:
    shape = getattr(value, "shape", None)
    if shape is not None:
        return f"{type(value).__name__} of shape {tuple(shape)}"
    return type(value).__name__


def _as_refs(y_true: Any, n: int, *, unanswerable: bool = False) -> list[list[str]]:
    """One list of reference texts per prediction; an empty list is refused, unless
    ``unanswerable`` (QA: a question with no answer)."""
    if isinstance(y_true, str | torch.Tensor | Mapping) or not isinstance(y_true, Iterable):
        raise TypeError(
            f"y_true must be a list with one reference text (or a list of texts) per "
            f"prediction; received {_described(y_true)}. {_DECODE_HINT}"
        )
    refs: list[list[str]] = []
    for i, item in enumerate(y_true):
        ref = [item] if isinstance(item, str) else item
        if not isinstance(ref, Iterable) or isinstance(ref, torch.Tensor):
            ref = None
        else:
            ref = list(ref)
        if ref is None or not all(isinstance(r, str) for r in ref):
            raise TypeError(
                f"y_true[{i}] must be a reference text or a list of texts; received "
                f"{_described(item)}. {_DECODE_HINT}"
            )
        if not ref and not unanswerable:
            raise ValueError(
                f"y_true[{i}] holds no reference text (an empty list); each prediction is "
                f"scored against its references, so pass at least one per prediction, or "
                f"leave out the predictions that have none."
            )
        refs.append(ref)
    if len(refs) != n:
        raise ValueError(
            f"{n} predictions but {len(refs)} references; pass one (list of) reference(s) each."
        )
    return refs


def _texts(y_pred: Any) -> list[str]:
    if isinstance(y_pred, str):
        raise TypeError(
            "y_pred must be a list of strings (one text per sample); received one str. Pass "
            "[text] for a single prediction."
        )
    if isinstance(y_pred, torch.Tensor | Mapping) or not isinstance(y_pred, Iterable):
        raise TypeError(
            f"y_pred must be a list of strings (one text per sample); received "
            f"{_described(y_pred)}. {_DECODE_HINT}"
        )
    texts = list(y_pred)
    wrong = next((t for t in texts if not isinstance(t, str)), None)
    if wrong is not None:
        raise TypeError(
            f"y_pred must be a list of strings (one text per sample); it holds a "
            f"{_described(wrong)}. {_DECODE_HINT}"
        )
    if not texts:  # BLEU would be 0.0 and ROUGE / QA NaN: scores of nothing
        raise ValueError(
            "y_pred holds no prediction (an empty list), so there is nothing to score; pass "
            "one predicted text per evaluated sample, with its reference(s) in y_true."
        )
    return texts


class RougeResults(ResultPackage):
    """ROUGE-1, ROUGE-2 and ROUGE-L (precision, recall, F1) for summaries or answers."""

    name = "rouge"

    def compute(
        self, y_pred: Any, y_true: Any, metadata: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Mean scores over pairs; ``y_true`` holds one reference or a list per prediction."""
        preds = _texts(y_pred)
        refs = _as_refs(y_true, len(preds))
        scorers = {
            "rouge1": lambda p, r: rouge_n(p, r, 1),
            "rouge2": lambda p, r: rouge_n(p, r, 2),
            "rougeL": rouge_l,
        }
        out: dict[str, Any] = {}
        for key, fn in scorers.items():
            best = [max((fn(p, r) for r in rs), key=lambda s: s[2]) for p, rs in zip(preds, refs)]
            for i, part in enumerate(("precision", "recall", "f1")):
                out[f"{key}_{part}"] = sum(s[i] for s in best) / len(best) if best else math.nan
        return out


class BleuResults(ResultPackage):
    """Corpus BLEU for translations, with torchmetrics' ``BLEUScore`` conventions.

    Texts are split on whitespace; each prediction's n-grams are clipped by their most
    frequent count in any one reference, and its reference length is the length of the
    reference closest to it (the first on a tie); the brevity penalty is
    ``exp(1 - ref_len / pred_len)`` over the corpus when the predictions are not longer.

    Args:
        n_gram: highest n-gram order.
        smooth: add-one smoothing of the 2- to n_gram-gram precisions (Lin & Och's BLEU+1;
            the unigram precision is kept as counted), so a corpus of short texts with no
            matching 4-gram still scores above 0. torchmetrics' ``bleu_score`` returns 0
            there before smoothing, so it is counted here.
    """

    name = "bleu"

    def __init__(self, n_gram: int = 4, smooth: bool = False) -> None:
        self.n_gram, self.smooth = n_gram, smooth

    def compute(
        self, y_pred: Any, y_true: Any, metadata: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """``{"bleu": score in [0, 1]}``."""
        preds = _texts(y_pred)
        refs = _as_refs(y_true, len(preds))
        return {"bleu": _corpus_bleu(preds, refs, self.n_gram, self.smooth)}


def _ngrams(tokens: Sequence[str], n_gram: int) -> Counter[tuple[str, ...]]:
    return Counter(
        tuple(tokens[i : i + n]) for n in range(1, n_gram + 1) for i in range(len(tokens) - n + 1)
    )


def _corpus_bleu(
    preds: Sequence[str], refs: Sequence[Sequence[str]], n_gram: int = 4, smooth: bool = False
) -> float:
    """Corpus BLEU of ``preds`` against their references (see :class:`BleuResults`)."""
    matched, total = [0] * n_gram, [0] * n_gram
    pred_len = ref_len = 0
    for pred, options in zip(preds, refs):
        tokens, references = pred.split(), [r.split() for r in options]
        pred_len += len(tokens)
        ref_len += len(min(references, key=lambda r: abs(len(r) - len(tokens))))
        best: Counter[tuple[str, ...]] = Counter()
        for ref in references:
            best |= _ngrams(ref, n_gram)
        counts = _ngrams(tokens, n_gram)
        for gram, k in (counts & best).items():
            matched[len(gram) - 1] += k
        for gram, k in counts.items():
            total[len(gram) - 1] += k
    if not matched[0] or (not smooth and min(matched) == 0):
        return 0.0  # a zero precision: the geometric mean is 0
    precisions = [matched[0] / total[0]]
    for n in range(1, n_gram):
        extra = 1 if smooth else 0
        precisions.append((matched[n] + extra) / (total[n] + extra))
    mean = math.exp(sum(math.log(p) for p in precisions) / n_gram)
    return mean if pred_len > ref_len else mean * math.exp(1 - ref_len / pred_len)


class PerplexityResults(ResultPackage):
    """Perplexity from token logits ``[N, T, V]`` and targets ``[N, T]`` (torchmetrics).

    The logits at position ``t`` are scored against the target at ``t``. A causal language
    model whose loss shifts the labels itself (Hugging Face ``...ForCausalLM``, whose
    ``labels`` are the ``input_ids``) predicts token ``t + 1`` at ``t``: pass
    ``shift_labels=True`` to score its logits at ``t`` against the target at ``t + 1``, as
    its own loss does (also through :meth:`evaluate`, where the logits cannot be sliced).
    Without ``shift_labels``, predictions that are such a model's output (a
    ``CausalLMOutput...``) are scored unshifted with a warning that says so. NaN or +inf
    logits at a scored position give a NaN or inf perplexity with a warning naming the
    position (a diverged model); -inf logits (tokens the model rules out) are fine.

    Args:
        ignore_index: target value to skip: by default -100, the padding ``predict`` and
            :meth:`evaluate` add and the ignore index of Hugging Face labels and
            ``torch.nn.CrossEntropyLoss``; None to score every target.
        shift_labels: score the logits at ``t`` against the target at ``t + 1`` (True) or
            at ``t`` (False, the default).
    """

    name = "perplexity"

    def __init__(
        self, ignore_index: int | None = PAD_VALUE, shift_labels: bool | None = None
    ) -> None:
        self.ignore_index = ignore_index
        self.shift_labels = shift_labels

    def compute(
        self, y_pred: Any, y_true: Any, metadata: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """``{"perplexity": exp(mean token cross-entropy)}``."""
        from torchmetrics.functional.text import perplexity

        shift = self.shift_labels
        warn_if_unshifted(y_pred, shift, "PerplexityResults")
        logits = as_tensor(y_pred, "y_pred").float()
        target = as_tensor(y_true, "y_true").long()
        if logits.dim() != 3 or target.shape != logits.shape[:2]:
            raise ValueError(
                f"perplexity needs logits [N, T, V] and targets [N, T]; received "
                f"{tuple(logits.shape)} and {tuple(target.shape)}."
            )
        if shift:  # the logits at t predict the token at t + 1
            logits, target = logits[:, :-1], target[:, 1:]
        scored = target[target != self.ignore_index] if self.ignore_index is not None else target
        if not scored.numel():  # torchmetrics would divide by zero tokens: a NaN perplexity
            received = tuple(as_tensor(y_true, "y_true").shape)
            why = (
                "a row of one token has no next token to score"
                if shift and target.shape[1] == 0
                else f"every target equals ignore_index={self.ignore_index}"
            )
            raise ValueError(
                f"perplexity: y_true holds no target to score (received targets of shape "
                f"{received}; {why}"
                f"{', after shifting by one position (shift_labels=True)' if shift else ''}). "
                f"Pass the labels of the predicted tokens: a collate function that sets "
                f"every label to ignore_index, or rows of one token when shifting, leave "
                f"none to score."
            )
        outside = scored[(scored < 0) | (scored >= logits.shape[-1])]
        if outside.numel():
            raise ValueError(
                f"perplexity: targets must be token ids in [0, {logits.shape[-1]}) (the "
                f"vocabulary of the logits) or ignore_index={self.ignore_index}; received "
                f"{int(outside[0])}. Pass ignore_index=<your padding value> to skip padding, "
                f"or check that the logits and targets come from the same vocabulary."
            )
        value = float(perplexity(logits, target, ignore_index=self.ignore_index))
        if not math.isfinite(value):
            _warn_diverged(logits, target, self.ignore_index)
        return {"perplexity": value}


def _warn_diverged(logits: torch.Tensor, target: torch.Tensor, ignore: int | None) -> None:
    """Warn that a perplexity is not finite, naming the scored positions whose logits hold
    NaN or +inf (-inf is a token the model rules out, and is fine)."""
    bad = (logits.isnan() | logits.isposinf()).any(dim=-1)
    if ignore is not None:
        bad &= target != ignore
    where = [tuple(int(i) for i in at) for at in bad.nonzero()[:3]]
    if not where:  # finite logits: exp(mean cross-entropy) overflowed float32
        warnings.warn(
            "PerplexityResults: the perplexity overflowed to inf (the mean cross-entropy "
            "is above about 88 nats): the model is far from the targets, or the logits "
            "and targets come from different vocabularies.",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
        return
    warnings.warn(
        f"PerplexityResults: the perplexity is not finite: the logits hold NaN or +inf at "
        f"{int(bad.sum())} scored position(s) (the first [row, token]: "
        f"{', '.join(map(str, where))}). A model that outputs them has diverged: "
        f"lower the learning rate or clip gradients and train again.",
        UserWarning,
        stacklevel=user_stacklevel(),
    )


class QAResults(ResultPackage):
    """Extractive QA: SQuAD exact match and token F1 (torchmetrics ``squad``), as fractions.

    ``y_pred`` is a list of answer strings; ``y_true`` a list of gold answers (a string
    or a list of acceptable strings per question). A question whose list is empty has no
    answer (SQuAD v2): as in SQuAD v2's official script, an empty prediction scores 1 on
    it and any other 0.
    """

    name = "qa"

    def compute(
        self, y_pred: Any, y_true: Any, metadata: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """``{"exact_match": ..., "f1": ...}`` in [0, 1]."""
        from torchmetrics.functional.text import squad

        preds = _texts(y_pred)
        refs = [r or [""] for r in _as_refs(y_true, len(preds), unanswerable=True)]
        p = [{"prediction_text": t, "id": str(i)} for i, t in enumerate(preds)]
        g: list[Any] = [
            {"answers": {"answer_start": [0] * len(r), "text": r}, "id": str(i)}
            for i, r in enumerate(refs)
        ]
        scores = squad(p, g)
        return {"exact_match": float(scores["exact_match"]) / 100, "f1": float(scores["f1"]) / 100}


def perplexity_from_loss(mean_token_loss: float | torch.Tensor) -> float:
    """Perplexity from a mean per-token cross-entropy.

    A language model's ``eval_loss_epoch`` is that mean only when every batch holds the
    same number of target tokens: it is a mean per sample of each batch's per-token mean,
    so with batches padded to different lengths it weighs tokens unevenly. Compute
    :class:`PerplexityResults` on the predictions for the exact value.
    """
    return float(math.exp(float(mean_token_loss)))
