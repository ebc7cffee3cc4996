"""A practitioner's numerics checks: mixed precision set-up errors, learning-rate schedules
over parameter groups, and resuming across precisions, each against what a hand-written
PyTorch loop or the docs say.
"""

from __future__ import annotations

import pytest
from tests.common.world import TinyMLP, blobs, make_trainer


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


def test_fp16_with_a_half_precision_model_says_to_keep_the_weights_in_float32() -> None:
    """``model.half()`` plus ``precision="fp16"``: the GradScaler cannot unscale fp16
    gradients. torch says only "Attempting to unscale FP16 gradients."; the error must
    say what was received, why and how to fix it."""
    model = TinyMLP().half()
    data = blobs(n=16)
    data.tensors = (data.tensors[0].half(), data.tensors[1])
    trainer = make_trainer(model, precision="fp16")
    with pytest.raises(ValueError, match=r"float16.*model\.float\(\)") as info:
        trainer.train(data, num_epochs=1, per_device_batch_size=4)
    assert "precision='fp16'" in str(info.value)
