"""Complex inputs (FFT features, I/Q signals) into a real-valued model: the error names the
complex dtype and the usual ways to feed it, instead of torch's bare 'got ComplexFloat and
Float'."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer


def test_complex_inputs_into_a_real_model_point_to_view_as_real() -> None:
    model = nn.Linear(4, 3)
    trainer = Trainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[]
    )
    data = TensorDataset(torch.randn(8, 4, dtype=torch.complex64), torch.zeros(8, dtype=torch.long))
    with pytest.raises(RuntimeError) as info:
        trainer.train(data, num_epochs=1, per_device_batch_size=4)
    text = str(info.value)
    assert "torch.complex64" in text and "torch.float32" in text
    assert "torch.view_as_real" in text and ".abs()" in text
    assert "x.float()" not in text  # that would drop the imaginary part
    assert isinstance(info.value.__cause__, RuntimeError)
