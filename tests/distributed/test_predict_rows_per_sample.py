"""``predict`` across processes with outputs that are not one row per sample (one value per
batch) is a clear error on every rank, not an indexing error or a list holding ``None``
(torchrun, 2 processes, gloo on CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.common.torchrun import run_worker

pytestmark = pytest.mark.distributed

WORKER = """
import json, sys
from pathlib import Path
import torch
from torch import nn
from torch.utils.data import TensorDataset
from scramjet import Trainer
from scramjet.runtime import init_distributed
from scramjet.runtime import distributed as dist

class PerBatch(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind, self.layer = kind, nn.Linear(4, 2)
    def forward(self, x):
        out = self.layer(x)
        return out.mean() if self.kind == "tensor" else [f"batch of {len(x)}"]

out = Path(sys.argv[1])
init_distributed()
data = TensorDataset(torch.randn(10, 4), torch.randn(10))
record = {}
for kind in ("tensor", "list"):
    model = PerBatch(kind)
    trainer = Trainer(model, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.1))
    try:
        result = trainer.predict(data, per_device_batch_size=4)
        record[kind] = "returned " + repr(result)
    except ValueError as error:
        record[kind] = str(error)
model = PerBatch("tensor")
model.forward = lambda x: model.layer(x)  # per-sample rows: unchanged
trainer = Trainer(model, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.1))
record["rows"] = list(trainer.predict(data, per_device_batch_size=4).shape)
(out / f"rank{dist.get_rank()}.json").write_text(json.dumps(record))
"""


def test_one_value_per_batch_is_refused_on_every_rank(tmp_path: Path) -> None:
    records = run_worker(WORKER, tmp_path, timeout=120)
    for rank, record in enumerate(records):
        # 10 samples, 5 per rank in batches of 4: two values per rank, four in all
        for kind in ("tensor", "list"):
            message = record[kind]
            assert "hold 4 rows in all for 10 samples" in message, (kind, message)
            assert f"rank {rank}: 2 rows for its 5 samples" in message, (kind, message)
            assert "one row per sample" in message, (kind, message)
        assert record["rows"] == [10, 2], record
