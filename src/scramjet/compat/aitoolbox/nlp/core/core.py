"""AIToolbox's basic text-processing helpers."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

__all__ = ["find_sub_list", "normalize_string", "unicode_to_ascii", "zero_pad_sequences"]

_SENTENCE_END = re.compile(r"([.!?])")
_NOT_WORD = re.compile(r"[^a-zA-Z0-9.!?]+")


def find_sub_list(sl: Sequence[Any], l: Sequence[Any]) -> tuple[int, int] | None:  # noqa: E741
    """First occurrence of the run ``sl`` inside ``l`` as ``(start, end)``, end inclusive.

    Returns:
        The span, or None when ``sl`` does not occur in ``l``.

    Raises:
        ValueError: ``sl`` is longer than ``l``.
    """
    sub, seq = list(sl), list(l)
    if len(sub) > len(seq):
        raise ValueError(
            f"the sub-list has {len(sub)} elements but the list only {len(seq)}; pass the "
            f"shorter sequence first: find_sub_list(sub_list, full_list)."
        )
    for start in range(len(seq) - len(sub) + 1):
        if seq[start : start + len(sub)] == sub:
            return start, start + len(sub) - 1
    return None


def unicode_to_ascii(s: str) -> str:
    """Drop accents: ``"café"`` → ``"cafe"``."""
    return "".join(c for c in unicodedata.normalize("NFD", s) if unicodedata.category(c) != "Mn")


def normalize_string(s: str) -> str:
    """Lower-case ASCII words and digits, sentence punctuation split off as its own token.

    ``"For this purpose, we propose a 2-level model."`` →
    ``"for this purpose we propose a 2 level model ."``
    """
    s = unicode_to_ascii(s.lower().strip())
    s = _SENTENCE_END.sub(r" \1", s)
    return _NOT_WORD.sub(" ", s).strip()


def zero_pad_sequences(sequences: Sequence[Sequence[int]], pad_value: int = 0) -> list[list[int]]:
    """Pad token-id sequences on the right to the longest one's length."""
    width = max((len(seq) for seq in sequences), default=0)
    return [list(seq) + [pad_value] * (width - len(seq)) for seq in sequences]
