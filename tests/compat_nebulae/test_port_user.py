"""A nebulae script with only its imports changed: the less common settings a port meets."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from scramjet.checkpoint import CheckpointMismatchError
from scramjet.compat.nebulae.astro import dock
from scramjet.compat.nebulae.cockpit import TimeMachine


class _Net(dock.Craft):
    def __init__(self, scope: str = "NET") -> None:
        super().__init__(scope)
        self.enc = torch.nn.Linear(4, 3)
        self.head = torch.nn.Linear(3, 2)

    def run(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.enc(x))


@pytest.mark.parametrize("file", ["", "best", "enc.pth"])
def test_frozen_load_of_a_partial_checkpoint_gives_advice_in_timemachine_words(
    tmp_path: Path, file: str
) -> None:
    tm = TimeMachine(tmp_path, tmp_path)
    tm.drop(_Net(), file=file, save_scope="enc")
    with pytest.raises(CheckpointMismatchError) as caught:
        tm.to(_Net(), file=file, frozen=True)
    text = str(caught.value)
    assert "head.weight" in text
    assert "frozen=False" in text and "ckpt_scope=" in text
    # TimeMachine.to() takes neither strict= nor scope=: advice naming them cannot be followed
    assert "strict=False" not in text and "scope='prefix'" not in text.replace("ckpt_scope", "")
