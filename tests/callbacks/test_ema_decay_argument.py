"""An EMA decay that is not a number (a string read from a config file, say) is refused
with the same message as one out of range, naming the value and the fix, rather than a
bare "'<' not supported between instances of 'float' and 'str'"."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

import scramjet.callbacks as core
import scramjet.compat.pytorch_accelerated.callbacks as peer
from scramjet.compat.pytorch_accelerated.utils import ModelEma


def _builders() -> list[Any]:
    return [
        lambda d: core.ModelEmaCallback(decay=d),
        lambda d: peer.ModelEmaCallback(decay=d),
        lambda d: ModelEma(torch.nn.Linear(2, 2), decay=d),
    ]


@pytest.mark.parametrize("decay", ["0.999", None, [0.9], True, math.nan, 1.0])
@pytest.mark.parametrize("which", range(3))
def test_a_decay_that_is_not_a_fraction_is_refused_with_its_value(decay: Any, which: int) -> None:
    with pytest.raises(ValueError, match="decay") as caught:
        _builders()[which](decay)
    message = str(caught.value)
    assert repr(decay) in message and "e.g. decay=0.999" in message


@pytest.mark.parametrize("decay", [0.5, np.float32(0.5)])
@pytest.mark.parametrize("which", range(3))
def test_a_fraction_is_accepted_as_a_number(decay: Any, which: int) -> None:
    built = _builders()[which](decay)
    assert built.decay == 0.5
