"""ROUGE of texts that differ only in their Unicode normalization form."""

from __future__ import annotations

import unicodedata

import pytest

from scramjet.metrics import RougeResults, rouge_l, rouge_n, tokenize


@pytest.mark.parametrize("form", ["NFD", "NFC"])
def test_composed_and_decomposed_accents_are_the_same_text(form: str) -> None:
    # A decoded prediction often carries decomposed accents (e + U+0301) where the
    # reference holds the composed letter (U+00E9): the same words, which scored 0.
    reference = "Le café de Zoë sert un crème brûlée à São Paulo"
    prediction = unicodedata.normalize(form, reference)
    assert tokenize(prediction) == tokenize(reference)
    assert rouge_n(prediction, reference, 1) == (1.0, 1.0, 1.0)
    assert rouge_n(reference, prediction, 2) == (1.0, 1.0, 1.0)
    assert rouge_l(prediction, reference) == (1.0, 1.0, 1.0)
    out = RougeResults()([prediction], [reference])
    assert all(value == 1.0 for value in out.values()), out


def test_accents_still_tell_words_apart() -> None:
    assert tokenize("résumé") != tokenize("resume")
    assert rouge_n("résumé", "resume", 1)[2] == 0.0
