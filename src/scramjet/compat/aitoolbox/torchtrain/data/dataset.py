"""Small map-style datasets over Python lists."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch.utils.data import Dataset

__all__ = ["BasicDataset", "ListDataset"]


class BasicDataset(Dataset[Any]):
    """A dataset whose samples are the items of ``data_list``."""

    def __init__(self, data_list: Sequence[Any]) -> None:
        self.data_list = data_list

    def __len__(self) -> int:
        return len(self.data_list)

    def __getitem__(self, idx: int) -> Any:
        return self.data_list[idx]


class ListDataset(Dataset[tuple[Any, ...]]):
    """Parallel lists of features: sample ``i`` is ``(list_1[i], list_2[i], ...)``."""

    def __init__(self, *data_lists: Sequence[Any]) -> None:
        lengths = {len(d) for d in data_lists}
        if len(lengths) > 1:
            raise ValueError(
                f"every list must have one entry per sample; received lengths "
                f"{[len(d) for d in data_lists]}."
            )
        self.data_lists = data_lists

    def __len__(self) -> int:
        return len(self.data_lists[0]) if self.data_lists else 0

    def __getitem__(self, idx: int) -> tuple[Any, ...]:
        return tuple(d[idx] for d in self.data_lists)
