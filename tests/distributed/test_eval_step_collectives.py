"""A collective at every evaluation step pairs up across ranks.

The Trainer's evaluation pads nothing (rank ``r`` takes ``r, r + W, ...``), so 33 samples
on 2 ranks in batches of 4 gave rank 0 five steps and rank 1 four. A callback that reduced
(``trainer.log(..., reduce="mean")``) or gathered (pytorch-accelerated's ``trainer.gather``
in ``on_eval_step_end``, its usual metrics pattern) at every step paired one rank's call
with another's different one, and gloo aborted the processes. Now the rank one batch
short splits its last batch, so every rank runs the same number of steps.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.common.torchrun import run_worker

from scramjet.trainer.samplers import EvenShardBatches, ShardSampler

pytestmark = pytest.mark.distributed

WORKER = """
import json, sys
import torch
from torch import nn
from torch.utils.data import TensorDataset
from scramjet.compat.pytorch_accelerated import Trainer
from scramjet.compat.pytorch_accelerated.callbacks import TrainerCallback
from scramjet.runtime import distributed as dist

class PerStep(TrainerCallback):
    def __init__(self):
        self.steps, self.gathered, self.sizes = 0, [], []
    def on_eval_step_end(self, trainer, batch, batch_output, **kwargs):
        self.steps += 1
        self.sizes.append(len(batch[1]))
        trainer.log("eval_seen", float(len(batch[1])), reduce="sum")
        self.gathered.append(trainer.gather(batch[1]))

g = torch.Generator().manual_seed(0)
train = TensorDataset(torch.randn(64, 4, generator=g), torch.randint(0, 2, (64,), generator=g))
labels = torch.arange(33)
evals = TensorDataset(torch.randn(33, 4, generator=g), labels)
model = nn.Linear(4, 2)
cb = PerStep()
trainer = Trainer(model, lambda out, y: nn.functional.cross_entropy(out, y % 2),
                  torch.optim.SGD(model.parameters(), lr=0.1), callbacks=(cb,))
trainer.train(train, num_epochs=1, eval_dataset=evals, per_device_batch_size=4)
seen = sorted(int(v) for t in cb.gathered for v in t)
predicted = trainer.predict(evals, per_device_batch_size=4)
with open(f"{sys.argv[1]}/rank{dist.get_rank()}.json", "w") as f:
    json.dump({"steps": cb.steps, "sizes": cb.sizes, "seen": seen,
               "logged": trainer.run_history.get_metric_values("eval_seen"),
               "predicted": list(predicted.shape)}, f)
"""


def test_per_step_reduce_and_gather_in_evaluation_pair_up_across_two_ranks(
    tmp_path: Path,
) -> None:
    rank0, rank1 = run_worker(WORKER, tmp_path, timeout=120)
    assert rank0["steps"] == rank1["steps"] == 5
    assert rank0["sizes"] == [4, 4, 4, 4, 1]  # 17 samples: r0 = 0, 2, ..., 32
    assert rank1["sizes"] == [4, 4, 4, 3, 1]  # 16 samples, the last batch split
    assert rank0["seen"] == rank1["seen"] == list(range(33))  # each sample once
    assert rank0["predicted"] == rank1["predicted"] == [33, 2]


@pytest.mark.parametrize(
    ("n", "world", "batch"), [(33, 2, 4), (32, 2, 4), (9, 2, 4), (17, 4, 4), (100, 3, 8)]
)
def test_every_rank_gets_the_same_number_of_batches_and_each_sample_once(
    n: int, world: int, batch: int
) -> None:
    counts = set()
    for rank in range(world):
        batches = list(EvenShardBatches(ShardSampler(range(n), world, rank), batch))
        assert len(batches) == len(EvenShardBatches(ShardSampler(range(n), world, rank), batch))
        assert [i for b in batches for i in b] == list(range(rank, n, world))  # in order
        assert all(0 < len(b) <= batch for b in batches)
        counts.add(len(batches))
    assert len(counts) == 1


def test_batches_of_one_keep_their_own_counts() -> None:
    counts = [len(EvenShardBatches(ShardSampler(range(5), 2, r), 1)) for r in range(2)]
    assert counts == [3, 2]  # a sample cannot be split: reduce at the epoch's end then
