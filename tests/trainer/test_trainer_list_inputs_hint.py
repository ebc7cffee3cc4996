"""A collate_fn that returns the inputs as a list of tensors (sequences of different lengths
left unpadded) hands the model a list: the error says what the batch held and how to make
one tensor of it, instead of torch's bare 'must be Tensor, not list'."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from scramjet import Trainer


def _samples() -> list[tuple[torch.Tensor, int]]:
    gen = torch.Generator().manual_seed(0)
    return [(torch.randn(4 + i % 3, generator=gen), i % 3) for i in range(8)]


def _as_list(samples: list[tuple[torch.Tensor, int]]) -> tuple[list[torch.Tensor], torch.Tensor]:
    return [x for x, _ in samples], torch.tensor([y for _, y in samples])


def _trainer() -> Trainer:
    model = nn.Linear(4, 3)
    return Trainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[]
    )


@pytest.mark.parametrize("where", ["train", "evaluate", "predict"])
def test_a_list_of_tensors_as_inputs_points_to_stacking_or_padding(where: str) -> None:
    trainer = _trainer()
    kwargs: dict[str, Any] = {"per_device_batch_size": 4, "collate_fn": _as_list}
    with pytest.raises(TypeError) as info:
        if where == "train":
            trainer.train(_samples(), num_epochs=1, **kwargs)
        elif where == "evaluate":
            trainer.evaluate(_samples(), **kwargs)
        else:
            trainer.predict(_samples(), **kwargs)
    text = str(info.value)
    assert "list of 4 tensors" in text and "(4,)" in text and "(5,)" in text
    assert "pad_sequence" in text and "torch.stack" in text
    assert isinstance(info.value.__cause__, TypeError)  # torch's own error kept
    assert trainer.state.global_step == 0


def test_a_type_error_of_the_model_itself_is_left_as_it_is() -> None:
    class Picky(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise TypeError("Picky wants something else")

    model = Picky()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    trainer = Trainer(model, nn.CrossEntropyLoss(), optimizer, callbacks=[])
    with pytest.raises(TypeError, match=r"^Picky wants something else$"):
        trainer.evaluate(_samples(), per_device_batch_size=4, collate_fn=_as_list)
