"""AIToolbox's word vocabulary with padding, out-of-vocabulary and boundary tokens."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["Vocabulary"]


class Vocabulary:
    """Word ↔ index maps; indices 0-3 are PAD, OOV, SOS, EOS (and 4-5 SOD, EOD for documents).

    Args:
        name: the vocabulary's name.
        document_level: also reserve start- and end-of-document tokens.
    """

    PAD_token = 0
    OOV_token = 1
    SOS_token = 2
    EOS_token = 3
    SOD_token = 4
    EOD_token = 5

    def __init__(self, name: str, document_level: bool = False) -> None:
        self.name = name
        self.document_level = document_level
        self.word2index: dict[str, int] = {}
        self.word2count: dict[str, int] = {}
        self.index2word: dict[int, str] = {
            self.PAD_token: "PAD",
            self.OOV_token: "OOV",
            self.SOS_token: "SOS",
            self.EOS_token: "EOS",
        }
        if document_level:
            self.index2word.update({self.SOD_token: "SOD", self.EOD_token: "EOD"})
        self.num_words = len(self.index2word)

    def add_sentence(self, sentence_tokens: Iterable[str]) -> None:
        """Add every token of a tokenised sentence."""
        for word in sentence_tokens:
            self.add_word(word)

    def add_word(self, word: str) -> None:
        """Give ``word`` the next free index (or count it again if known)."""
        if word in self.word2index:
            self.word2count[word] += 1
            return
        self.word2index[word] = self.num_words
        self.word2count[word] = 1
        self.index2word[self.num_words] = word
        self.num_words += 1

    def convert_sent2idx_sent(
        self, sentence_tokens: Sequence[str], start_end_token: bool = True
    ) -> list[int]:
        """Token indices, unknown words as OOV, framed by SOS/EOS unless told otherwise."""
        ids = [self.word2index.get(word, self.OOV_token) for word in sentence_tokens]
        return [self.SOS_token, *ids, self.EOS_token] if start_end_token else ids

    def convert_idx_sent2sent(
        self, idx_sentence: Sequence[int], rm_default_tokens: bool = False
    ) -> list[str]:
        """Words of the indices; ``rm_default_tokens`` drops PAD/SOS/EOS/SOD/EOD."""
        skip = {self.PAD_token, self.SOS_token, self.EOS_token}
        if self.document_level:
            skip |= {self.SOD_token, self.EOD_token}
        return [
            self.index2word.get(int(i), "OOV")
            for i in idx_sentence
            if not (rm_default_tokens and int(i) in skip)
        ]

    def __len__(self) -> int:
        return self.num_words
