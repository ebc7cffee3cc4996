"""``predict`` of a Trainer with ``precision="bf16"`` (autocast on the CPU): the logits of a
Hugging Face model came back in bfloat16, which ``.numpy()`` refuses and most metric code
mishandles; they are handed back in float32, as the autocast wrapper does, close to an fp32
forward."""

from __future__ import annotations

import pytest
import torch

from scramjet import Trainer

transformers = pytest.importorskip("transformers")


def test_bf16_predict_hands_back_float32_logits() -> None:
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=32,
    )  # fmt: skip
    model = transformers.BertForSequenceClassification(config).eval()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 50, (6, 8), generator=g)
    data = [{"input_ids": row, "attention_mask": torch.ones(8, dtype=torch.long)} for row in ids]
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    trainer = Trainer(model, None, torch.optim.SGD(model.parameters(), lr=0.1), precision="bf16")

    logits = trainer.predict(data, per_device_batch_size=4).logits

    assert logits.dtype == torch.float32, f"predict handed back {logits.dtype} logits"
    assert logits.shape == (6, 2)
    torch.testing.assert_close(logits, expected, atol=5e-2, rtol=5e-2)  # bf16's 8-bit mantissa
    assert logits.numpy().shape == (6, 2)
