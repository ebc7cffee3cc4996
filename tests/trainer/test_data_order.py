"""The data order: samplers, the length probe, shard gathering and the Trainer's DataOrder."""

from __future__ import annotations

import itertools
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.common.torchrun import run_torchrun
from torch.utils.data import (
    DataLoader,
    DistributedSampler,
    IterableDataset,
    SequentialSampler,
    TensorDataset,
)

from scramjet.trainer.data_order import (
    DataOrder,
    EpochSampler,
    ShardSampler,
    SkipSampler,
    gather_shards,
    safe_len,
)

ROOT = Path(__file__).resolve().parents[2]


def _items(n: int) -> TensorDataset:
    """Sample ``i`` is the value ``i``, so batches show which indices they hold."""
    return TensorDataset(torch.arange(n))


def _values(batches: Any) -> list[int]:
    return [int(v) for batch in batches for v in batch[0]]


class _Stream(IterableDataset[int]):
    """0, 1, ..., n - 1 as an iterable dataset; with ``sized`` it also has a length."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.n))


class _SizedStream(_Stream):
    def __len__(self) -> int:
        return self.n


# ----------------------------------------------------------------- EpochSampler
def test_epoch_sampler_order_depends_only_on_seed_and_epoch() -> None:
    data = range(50)
    a, b = EpochSampler(data, seed=7), EpochSampler(data, seed=7)
    a.set_epoch(3)
    b.set_epoch(3)
    assert list(a) == list(b)
    assert sorted(a) == list(range(50))
    first = list(a)
    a.set_epoch(4)
    assert list(a) != first, "every epoch is a new permutation"
    assert list(EpochSampler(data, seed=8)) != list(EpochSampler(data, seed=7))


def test_epoch_sampler_without_shuffle_is_sequential() -> None:
    sampler = EpochSampler(range(7), shuffle=False, seed=3)
    sampler.set_epoch(5)
    assert list(sampler) == list(range(7))
    assert len(sampler) == 7


@pytest.mark.parametrize("drop_last", [False, True])
# (2, 5), (1, 3), (3, 8): fewer samples than half the ranks, so the padding repeats the
# order more than once; every rank must still yield len() indices.
@pytest.mark.parametrize(("n", "world"), [(10, 3), (12, 4), (7, 2), (5, 4), (2, 5), (1, 3), (3, 8)])
def test_epoch_sampler_shards_like_distributed_sampler(n: int, world: int, drop_last: bool) -> None:
    data = range(n)
    shards = []
    for rank in range(world):
        ours = EpochSampler(data, seed=11, num_replicas=world, rank=rank, drop_last=drop_last)
        ref = DistributedSampler(
            data, num_replicas=world, rank=rank, shuffle=True, seed=11, drop_last=drop_last
        )
        ours.set_epoch(2)
        ref.set_epoch(2)
        assert list(ours) == list(ref), f"rank {rank}"
        assert len(ours) == len(ref) == len(list(ours)), f"rank {rank}"
        shards.append(list(ours))
    assert len({len(s) for s in shards}) == 1, "every rank takes the same number of steps"
    flat = [i for shard in shards for i in shard]
    if drop_last:
        assert len(set(flat)) == len(flat) == (n // world) * world, "no index twice"
    else:
        assert set(flat) == set(data), "every index is covered"
        assert len(flat) == -(-n // world) * world, "padded to a multiple of the ranks"


def test_epoch_sampler_set_start_skips_exactly() -> None:
    sampler = EpochSampler(range(20), seed=4, num_replicas=2, rank=1)
    sampler.set_epoch(1)
    full = list(sampler)
    for start in (0, 1, 7, 10):
        sampler.set_start(start)
        assert list(sampler) == full[start:]
        assert len(sampler) == len(full) - start
    sampler.set_start(25)
    assert list(sampler) == [] and len(sampler) == 0
    with pytest.raises(ValueError, match="set_start got -3"):
        sampler.set_start(-3)


# ----------------------------------------------------------------- ShardSampler
@pytest.mark.parametrize(("n", "world"), [(10, 3), (4, 4), (2, 3)])
def test_shard_sampler_strides_without_padding(n: int, world: int) -> None:
    shards = [list(ShardSampler(range(n), world, rank)) for rank in range(world)]
    for rank, shard in enumerate(shards):
        assert shard == list(range(rank, n, world))
        assert len(ShardSampler(range(n), world, rank)) == len(shard)
    flat = sorted(i for shard in shards for i in shard)
    assert flat == list(range(n)), "each sample exactly once"


def test_shard_sampler_in_one_process_is_the_dataset_order() -> None:
    assert list(ShardSampler(range(6))) == list(range(6))


# ----------------------------------------------------------------- SkipSampler
def test_skip_sampler_skips_the_first_indices_of_any_sampler() -> None:
    inner = SequentialSampler(range(9))
    sampler = SkipSampler(inner)
    assert list(sampler) == list(range(9)) and len(sampler) == 9
    sampler.set_start(4)
    assert list(sampler) == [4, 5, 6, 7, 8] and len(sampler) == 5
    sampler.set_start(12)
    assert list(sampler) == [] and len(sampler) == 0


def test_skip_sampler_forwards_set_epoch() -> None:
    inner = DistributedSampler(range(30), num_replicas=1, rank=0, seed=2)
    sampler = SkipSampler(inner)
    epochs = []
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        ref = DistributedSampler(range(30), num_replicas=1, rank=0, seed=2)
        ref.set_epoch(epoch)
        assert list(sampler) == list(ref)
        epochs.append(list(sampler))
    assert epochs[0] != epochs[1]
    sampler.set_start(3)
    assert list(sampler) == epochs[1][3:]
    SkipSampler(SequentialSampler(range(3))).set_epoch(1)  # no set_epoch to forward: fine


# ----------------------------------------------------------------- safe_len, gather_shards
def test_safe_len() -> None:
    assert safe_len([1, 2, 3]) == 3
    assert safe_len(_items(5)) == 5
    assert safe_len(DataLoader(_items(5), batch_size=2)) == 3
    assert safe_len(_Stream(4)) == 0
    assert safe_len(DataLoader(_Stream(4), batch_size=2)) == 0
    assert safe_len(x for x in range(3)) == 0


def test_gather_shards_in_one_process_returns_its_input() -> None:
    for local in (torch.arange(4), [3, 1, 2], {"a": torch.ones(2), "b": [1, 2]}):
        assert gather_shards(local, 4) is local


# ----------------------------------------------------------------- DataOrder: the seed
def test_requested_seed_is_used() -> None:
    assert DataOrder(seed=5).seed == 5


def test_drawn_seed_follows_torch_manual_seed() -> None:
    torch.manual_seed(123)
    first = DataOrder().seed
    torch.manual_seed(123)
    order = DataOrder()
    assert order.seed == first
    torch.randn(3)  # touching the global RNG afterwards does not change a drawn seed
    assert order.seed == first
    torch.manual_seed(124)
    assert DataOrder().seed != first


def test_new_run_forgets_the_seed() -> None:
    torch.manual_seed(0)
    order = DataOrder()
    first = order.seed
    order.new_run()
    assert order.seed != first, "a new run draws a new seed"
    requested = DataOrder(seed=9)
    requested.load_state_dict({"seed": 42})
    assert requested.seed == 42
    requested.new_run()
    assert requested.seed == 9, "a new run takes the requested seed again"


def test_state_dict_before_any_seed_is_needed() -> None:
    assert DataOrder().state_dict() == {"seed": 0}
    assert DataOrder(seed=3).state_dict() == {"seed": 0}


# ----------------------------------------------------------------- DataOrder: loaders
def test_train_loader_for_a_map_style_dataset_uses_an_epoch_sampler() -> None:
    order = DataOrder(seed=6)
    data = _items(10)
    loader = order.train_loader(data, {"batch_size": 3}, shuffle=True)
    assert isinstance(loader.sampler, EpochSampler)
    assert loader.sampler.seed == 6 and loader.sampler.shuffle
    assert loader.batch_size == 3
    assert sorted(_values(loader)) == list(range(10))
    sequential = order.train_loader(data, {"batch_size": 3}, shuffle=False)
    assert _values(sequential) == list(range(10))


def test_train_loader_wraps_a_user_sampler() -> None:
    order = DataOrder(seed=6)
    data = _items(8)
    inner = SequentialSampler(data)
    loader = order.train_loader(data, {"batch_size": 2, "sampler": inner}, shuffle=True)
    assert isinstance(loader.sampler, SkipSampler) and loader.sampler.sampler is inner
    given = EpochSampler(data, seed=1)
    kept = order.train_loader(data, {"batch_size": 2, "sampler": given}, shuffle=True)
    assert kept.sampler is given, "an EpochSampler is already resumable"


def test_train_loader_for_an_iterable_dataset_has_its_own_generator() -> None:
    order = DataOrder(seed=6)
    loader = order.train_loader(_Stream(6), {"batch_size": 2}, shuffle=True)
    assert isinstance(loader.generator, torch.Generator)
    assert loader.generator.initial_seed() == 6
    torch.manual_seed(0)
    before = torch.get_rng_state()
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4, 5]]
    assert torch.equal(torch.get_rng_state(), before), "an epoch draws nothing from torch's RNG"


# ----------------------------------------------------------------- DataOrder: epoch batches
def _epoch(order: DataOrder, loader: Any, data: Any, epoch: int, skip: int = 0) -> Any:
    return order.epoch_batches(loader, data, epoch=epoch, skip=skip, batch_size=2)


def test_epoch_batches_skip_indices_of_a_map_style_dataset() -> None:
    order = DataOrder(seed=2)
    data = _items(11)
    loader = order.train_loader(data, {"batch_size": 2}, shuffle=True)
    batches, total = _epoch(order, loader, data, epoch=1)
    full = [b[0].tolist() for b in batches]
    assert total == 6 and len(full) == 6
    batches, total = _epoch(order, loader, data, epoch=1, skip=2)
    assert [b[0].tolist() for b in batches] == full[2:]
    assert total == 6, "the length counts the skipped batches"
    assert loader.sampler.start == 4, "indices are skipped, not loaded batches"
    batches, _ = _epoch(order, loader, data, epoch=2)
    assert [b[0].tolist() for b in batches] != full, "the next epoch has a new order"


def test_epoch_batches_skip_indices_of_a_user_sampler() -> None:
    order = DataOrder(seed=2)
    data = _items(7)
    loader = order.train_loader(data, {"batch_size": 2, "sampler": SequentialSampler(data)}, shuffle=False)  # fmt: skip
    batches, total = _epoch(order, loader, data, epoch=0, skip=1)
    assert _values(batches) == [2, 3, 4, 5, 6]
    assert total == 4


def test_epoch_batches_read_past_batches_of_an_iterable_dataset() -> None:
    order = DataOrder(seed=2)
    for data, length in ((_Stream(7), 0), (_SizedStream(7), 4)):
        loader = order.train_loader(data, {"batch_size": 2}, shuffle=True)
        batches, total = _epoch(order, loader, data, epoch=0, skip=2)
        assert [b.tolist() for b in batches] == [[4, 5], [6]]
        assert total == length, "the full length where the dataset has one, else 0 (unknown)"
        batches, _ = _epoch(order, loader, data, epoch=0)
        assert [b.tolist() for b in batches] == [[0, 1], [2, 3], [4, 5], [6]]


def test_epoch_batches_select_the_epoch_on_the_dataset() -> None:
    class Epochs(TensorDataset):
        epoch = -1

        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch

    order = DataOrder(seed=0)
    data = Epochs(torch.arange(4))
    loader = order.train_loader(data, {"batch_size": 2}, shuffle=True)
    _epoch(order, loader, data, epoch=3)
    assert data.epoch == 3


def test_epoch_batches_reseed_the_workers_per_epoch() -> None:
    order = DataOrder(seed=8)
    data = _items(4)
    loader = order.train_loader(data, {"batch_size": 2}, shuffle=True)
    seeds = []
    for epoch in (0, 1, 1):
        _epoch(order, loader, data, epoch=epoch)
        seeds.append(loader.generator.initial_seed())
    assert seeds[0] != seeds[1] and seeds[1] == seeds[2]


def test_restored_seed_sets_the_next_epochs_order() -> None:
    data = _items(16)
    original = DataOrder(seed=31)
    loader = original.train_loader(data, {"batch_size": 2}, shuffle=True)
    _epoch(original, loader, data, epoch=0)
    state = original.state_dict()
    assert state == {"seed": 31}
    expected = _values(_epoch(original, loader, data, epoch=1)[0])

    torch.manual_seed(1)
    resumed = DataOrder()  # draws its own seed when its loader is made
    resumed_loader = resumed.train_loader(data, {"batch_size": 2}, shuffle=True)
    assert resumed.seed != 31
    resumed.load_state_dict(state)
    assert resumed.state_dict() == state
    assert _values(_epoch(resumed, resumed_loader, data, epoch=1)[0]) == expected
    fresh_loader = resumed.train_loader(data, {"batch_size": 2}, shuffle=True)
    assert _values(_epoch(resumed, fresh_loader, data, epoch=1)[0]) == expected


# ----------------------------------------------------------------- two real processes
SCRIPT = textwrap.dedent(
    """
    import json, sys
    import torch
    sys.path.insert(0, {root!r})
    torch.set_num_threads(1)
    from scramjet.runtime import distributed as dist
    from scramjet.trainer.data_order import EpochSampler, ShardSampler, gather_shards

    dist.init_distributed()
    n = 11
    values = torch.arange(n) * 10  # the dataset: sample i is 10 * i
    mine = list(ShardSampler(range(n), dist.get_world_size(), dist.get_rank()))
    local = {{
        "rows": torch.stack([values[mine], values[mine] + 1], dim=1),
        "names": [f"s{{i}}" for i in mine],
    }}
    ordered = gather_shards(local, n)
    epoch = EpochSampler(range(n), seed=3, num_replicas=dist.get_world_size(),
                         rank=dist.get_rank())
    epoch.set_epoch(1)
    shares = dist.gather_object(list(epoch))
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps({{
            "world": dist.get_world_size(),
            "local": len(mine),
            "rows": ordered["rows"].tolist(),
            "names": ordered["names"],
            "shares": shares,
        }}))
    dist.barrier()
    dist.destroy_distributed()
    """
)


@pytest.mark.distributed
def test_gather_shards_restores_dataset_order_across_two_processes(tmp_path: Path) -> None:
    script = tmp_path / "gather_shards.py"
    script.write_text(SCRIPT.format(root=str(ROOT)))
    out = run_torchrun(script)
    assert out.returncode == 0, out.stderr[-3000:]
    (line,) = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    result = json.loads(line.removeprefix("RESULT "))
    assert result["world"] == 2 and result["local"] == 6, "rank 0 held 6 of the 11 samples"
    assert result["rows"] == [[10 * i, 10 * i + 1] for i in range(11)]
    assert result["names"] == [f"s{i}" for i in range(11)]
    shares = result["shares"]
    assert len(shares[0]) == len(shares[1]) == 6
    assert set(itertools.chain(*shares)) == set(range(11)), "the two shares cover the dataset"
