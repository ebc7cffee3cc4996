"""``predict`` joins a model's list of heads as it joins a tuple of them.

A model returning ``[head_a(x), head_b(x)]`` had its per-batch lists chained (13 samples
in batches of 5 gave six tensors of 5, 5 and 3 rows), and a sampler's order was not undone.
Lists that hold one entry per sample (detection results, per-sample tensors) are still
chained, one entry per sample, in dataset order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from tests.common.torchrun import run_worker
from torch import nn

from scramjet import Trainer

X = torch.randn(13, 4, generator=torch.Generator().manual_seed(0))
DATA = list(zip(X, torch.zeros(13, dtype=torch.long)))
REVERSED = {"sampler": list(reversed(range(13)))}


class Heads(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b, self.kind = nn.Linear(4, 2), nn.Linear(4, 3), kind

    def forward(self, x: torch.Tensor) -> Any:
        heads = [self.a(x), self.b(x)]
        if self.kind == "dict":
            return {"heads": heads, "a": heads[0]}
        if self.kind == "per sample":  # one entry per sample, of the same shape: chained
            return [row * 2 for row in self.a(x)]
        return heads


def predict(kind: str, **kwargs: Any) -> tuple[Any, Heads]:
    model = Heads(kind)
    loss = nn.CrossEntropyLoss()
    trainer = Trainer(model, loss, torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[])
    return trainer.predict(DATA, per_device_batch_size=5, **kwargs), model


def test_a_list_of_heads_is_joined_head_by_head_in_dataset_order() -> None:
    for kwargs in ({}, {"dataloader_kwargs": REVERSED}):
        out, model = predict("list", **kwargs)
        assert isinstance(out, list) and [tuple(t.shape) for t in out] == [(13, 2), (13, 3)]
        with torch.no_grad():
            assert torch.allclose(out[0], model.a(X)) and torch.allclose(out[1], model.b(X))


def test_a_list_of_heads_inside_a_dict_is_joined_too() -> None:
    out, model = predict("dict", dataloader_kwargs=REVERSED)
    assert [tuple(t.shape) for t in out["heads"]] == [(13, 2), (13, 3)]
    with torch.no_grad():
        assert torch.allclose(out["heads"][1], model.b(X))
        assert torch.allclose(out["a"], model.a(X))


def test_a_list_with_one_entry_per_sample_is_still_chained_in_dataset_order() -> None:
    for kwargs in ({}, {"dataloader_kwargs": REVERSED}):
        out, model = predict("per sample", **kwargs)
        assert isinstance(out, list) and len(out) == 13
        with torch.no_grad():
            assert all(torch.allclose(out[i], model.a(X[i]) * 2) for i in range(13))


WORKER = """
import json, sys
import torch
from torch import nn
from scramjet import Trainer
from scramjet.runtime import distributed as dist

class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = nn.Linear(4, 2), nn.Linear(4, 3)
    def forward(self, x):
        return [self.a(x), self.b(x)]

X = torch.randn(13, 4, generator=torch.Generator().manual_seed(0))
model = Heads()
trainer = Trainer(model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1),
                  callbacks=[])
out = trainer.predict(list(zip(X, torch.zeros(13, dtype=torch.long))), per_device_batch_size=3)
with torch.no_grad():
    same = [torch.allclose(out[0], model.a(X)), torch.allclose(out[1], model.b(X))]
rank = dist.get_rank()
with open(f"{sys.argv[1]}/rank{rank}.json", "w") as f:
    json.dump({"shapes": [list(t.shape) for t in out], "same": same}, f)
"""


@pytest.mark.distributed
def test_a_list_of_heads_is_gathered_head_by_head_across_two_processes(tmp_path: Path) -> None:
    for result in run_worker(WORKER, tmp_path):
        assert result == {"shapes": [[13, 2], [13, 3]], "same": [True, True]}
