"""ROUGE of summaries that are not in English: tokens are runs of letters and digits of
any script (the tokenizer's docstring), and each Chinese or Japanese character is a token
of its own, since those scripts put no spaces between words."""

from __future__ import annotations

import pytest

from scramjet.metrics import RougeResults, rouge_n, tokenize


@pytest.mark.parametrize(
    "text",
    ["кошка сидит на коврике", "η γάτα κάθεται", "القط يجلس", "猫坐在垫子上", "the café is open"],
)
def test_a_summary_identical_to_its_reference_scores_one(text: str) -> None:
    scores = RougeResults().compute([text], [text])

    assert scores["rouge1_f1"] == 1.0
    assert scores["rougeL_f1"] == 1.0


def test_letters_of_any_script_are_kept_and_lower_cased() -> None:
    assert tokenize("Кошка, CAFÉ_au-lait 42!") == ["кошка", "café", "au", "lait", "42"]


def test_chinese_characters_overlap_one_by_one() -> None:
    precision, recall, _ = rouge_n("猫坐在垫子上", "猫坐在地上", 1)  # 猫 坐 在 上 shared

    assert (precision, recall) == pytest.approx((4 / 6, 4 / 5))


def test_cyrillic_partial_overlap_counts_the_shared_words() -> None:
    precision, recall, _ = rouge_n("кошка сидит", "кошка сидит на коврике", 1)

    assert (precision, recall) == pytest.approx((1.0, 2 / 4))


def test_vowel_signs_stay_in_their_word() -> None:
    assert tokenize("नमस्ते दुनिया") == ["नमस्ते", "दुनिया"]
