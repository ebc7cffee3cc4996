"""``for batch in tank`` on a nebulae Tank: the rest of the epoch under way, or a whole
epoch when none is, so that its loops stay aligned with the Tank's epochs however they
are mixed with ``tank.next()``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from scramjet.compat.nebulae.fuel import depot
from scramjet.data import pack


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pack of 12 samples, label = row."""
    root = tmp_path_factory.mktemp("tank_iter")
    raw = root / "raw"
    raw.mkdir()
    for i in range(12):
        Image.fromarray(np.full((4, 4, 3), i, np.uint8)).save(raw / f"{i}.png")
    (raw / "list.csv").write_text("image,label\n" + "".join(f"{i}.png,{i}\n" for i in range(12)))
    pack(raw, raw / "list.csv", root / "p.pack", dtype=["int64"], height=4, width=4,
         workers=0, progress=False)  # fmt: skip
    return root / "p.pack"


def _labels(batches: list[dict[str, object]]) -> list[int]:
    return [int(x) for b in batches for x in b["label"]]  # type: ignore[attr-defined]


def test_iterating_after_next_calls_yields_the_rest_of_that_epoch(packed: Path) -> None:
    tank = depot.Tank(str(packed), {"label": "int64"}, 3, seed=4)
    assert tank.MPE == 4
    first = [tank.next(), tank.next()]
    rest = list(tank)
    assert len(rest) == 2, f"expected the 2 batches left of epoch 0, got {len(rest)}"
    assert sorted(_labels(first + rest)) == list(range(12))  # one epoch, every sample once
    assert tank.epoch == 0
    following = list(tank)  # the epoch ended: a whole new one
    assert len(following) == 4 and sorted(_labels(following)) == list(range(12))
    assert tank.epoch == 1


def test_an_epoch_loop_of_for_loops_reads_whole_epochs(packed: Path) -> None:
    tank = depot.Tank(str(packed), {"label": "int64"}, 3, seed=4)
    for epoch in range(3):
        labels = _labels(list(tank))
        assert sorted(labels) == list(range(12)) and tank.epoch == epoch
    batches = [tank.next() for _ in range(tank.MPE)]  # next() goes on with the next epoch
    assert sorted(_labels(batches)) == list(range(12)) and tank.epoch == 3
