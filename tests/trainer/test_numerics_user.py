"""A practitioner's numerics checks: mixed precision set-up errors, learning-rate schedules
over parameter groups, and resuming across precisions, each against what a hand-written
PyTorch loop or the docs say.
"""

from __future__ import annotations

import pytest
from tests.common.world import TinyMLP, make_trainer


def test_an_unknown_precision_from_accelerate_launch_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``accelerate launch --mixed_precision fp8`` sets the variable; the user passed no
    precision, so the error must say where the value came from and how to override it."""
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "fp8")
    with pytest.raises(ValueError, match="ACCELERATE_MIXED_PRECISION") as info:
        make_trainer(TinyMLP())
    message = str(info.value)
    assert "'fp8'" in message and "'bf16'" in message and "precision=" in message


def test_float32_is_accepted_like_float16_and_bfloat16() -> None:
    assert make_trainer(TinyMLP(), precision="float32").precision == "no"
    assert make_trainer(TinyMLP(), precision="float16").precision == "fp16"
