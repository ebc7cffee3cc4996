"""The epoch order does not depend on the number of processes, and a run resumed
mid-epoch on another number of processes (2 -> 1, 1 -> 2) sees each remaining sample
exactly once. The 2-process sides run under real torchrun (gloo)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.common.torchrun import run_torchrun
from torch.utils.data import Dataset

from scramjet.trainer.data_order import DataOrder, EpochSampler, shard_window_order


class Shards(Dataset[int]):
    """Sample ``i`` is ``i``; 6 shards of 8 samples, shuffled 2 shards at a time."""

    shard_sizes = [8] * 6
    shuffle_window = 2

    def __len__(self) -> int:
        return 48

    def __getitem__(self, i: int) -> int:
        return i


class Plain(Shards):
    shuffle_window = None  # type: ignore[assignment]


@pytest.mark.parametrize("data", [Shards(), Plain()], ids=["shard-window", "full"])
def test_ranks_take_their_part_of_one_global_order(data: Dataset[int]) -> None:
    whole = list(EpochSampler(data, seed=4))
    assert sorted(whole) == list(range(48))
    for world in (2, 3, 4):
        parts = [list(EpochSampler(data, seed=4, num_replicas=world, rank=r)) for r in range(world)]
        interleaved = [parts[r][i] for i in range(48 // world) for r in range(world)]
        assert interleaved == whole


def test_shard_window_order_reads_a_few_shards_at_a_time() -> None:
    g = torch.Generator().manual_seed(0)
    order = shard_window_order([8] * 6, 2, g)
    assert sorted(order) == list(range(48))
    for w in range(3):  # each run of 16 positions holds exactly 2 whole shards
        shards = {i // 8 for i in order[16 * w : 16 * w + 16]}
        assert len(shards) == 2
    full = shard_window_order([8] * 6, 6, torch.Generator().manual_seed(0))
    assert sorted(full) == list(range(48)) and full != list(range(48))


def test_resume_within_one_process_count_keeps_the_old_split() -> None:
    """Same number of processes: resume_state skips exactly per rank, as before."""
    data = Shards()
    order = DataOrder(seed=9)
    loader = order.train_loader(data, {"batch_size": 4}, shuffle=True)
    batches, _ = order.epoch_batches(loader, data, epoch=2, skip=0, batch_size=4)
    seen = [int(v) for b in list(batches)[:5] for v in b]
    state = order.resume_state()
    again = DataOrder()
    again.load_state_dict(state)
    loader = again.train_loader(data, {"batch_size": 4}, shuffle=True)
    rest, total = again.epoch_batches(loader, data, epoch=2, skip=5, batch_size=4)
    left = [int(v) for b in rest for v in b]
    assert total == 12 and sorted(seen + left) == list(range(48))


SCRIPT = textwrap.dedent(
    """
    import json, sys
    import torch.distributed as tdist
    sys.path[:0] = [sys.argv[3], sys.argv[4]]
    from test_order_world_size import Shards, consume
    tdist.init_process_group("gloo")
    mode, folder = sys.argv[1], sys.argv[2]
    rank = tdist.get_rank()
    if mode == "first":
        seen, state = consume(None, skip=0, take=3)
    else:
        state_in = json.load(open(f"{folder}/state.json"))
        seen, state = consume(state_in, skip=state_in["skip"], take=None)
    json.dump({"seen": seen, "state": state}, open(f"{folder}/{mode}{rank}.json", "w"))
    tdist.barrier()
    tdist.destroy_process_group()
    """
)


def consume(state: dict[str, Any] | None, *, skip: int, take: int | None) -> tuple[list[int], Any]:
    """Run epoch 1 of a DataOrder over :class:`Shards` (batch size 4) in this process:
    restore ``state``, skip ``skip`` batches, read ``take`` batches (all when None)."""
    order = DataOrder(seed=21)
    if state is not None:
        order.load_state_dict(state)
    data = Shards()
    loader = order.train_loader(data, {"batch_size": 4}, shuffle=True)
    batches, _ = order.epoch_batches(loader, data, epoch=1, skip=skip, batch_size=4)
    seen = []
    for n, batch in enumerate(batches):
        if take is not None and n == take:
            break
        seen += [int(v) for v in batch]
    return seen, {**order.resume_state(), "skip": skip + (take or 0)}


PATHS = (str(Path(__file__).parent), str(Path(__file__).parents[2]))  # this module, the repo


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    return script


@pytest.mark.distributed
@pytest.mark.slow  # the default run: tests/resume/test_world_size_resume.py, end to end
def test_resume_from_two_processes_on_one(tmp_path: Path) -> None:
    result = run_torchrun(_script(tmp_path), "first", str(tmp_path), *PATHS, nproc=2)
    assert result.returncode == 0, result.stderr[-3000:]
    parts = [json.loads((tmp_path / f"first{r}.json").read_text()) for r in range(2)]
    seen = parts[0]["seen"] + parts[1]["seen"]
    assert len(seen) == 24 and parts[0]["state"]["world_size"] == 2
    rest, _ = consume(parts[0]["state"], skip=parts[0]["state"]["skip"], take=None)
    assert len(rest) == 24 and sorted(seen + rest) == list(range(48))
    # saved again by the 1-process run after 2 more batches, then resumed once more
    more, state = consume(parts[0]["state"], skip=parts[0]["state"]["skip"], take=2)
    assert state["skip"] == 5 and state["consumed_base"] == 24 and state["skip_base"] == 3
    last, _ = consume(state, skip=state["skip"], take=None)
    assert more == rest[:8] and last == rest[8:]


@pytest.mark.distributed
@pytest.mark.slow  # the default run: tests/resume/test_world_size_resume.py, end to end
def test_resume_from_one_process_on_two(tmp_path: Path) -> None:
    seen, state = consume(None, skip=0, take=5)  # 20 samples in one process
    (tmp_path / "state.json").write_text(json.dumps(state))
    result = run_torchrun(_script(tmp_path), "second", str(tmp_path), *PATHS, nproc=2)
    assert result.returncode == 0, result.stderr[-3000:]
    parts = [json.loads((tmp_path / f"second{r}.json").read_text())["seen"] for r in range(2)]
    assert len(parts[0]) == len(parts[1]) == 14
    assert sorted(seen + parts[0] + parts[1]) == list(range(48))
    # and it is the same order: what rank r reads is its part of the one global order
    whole = list(EpochSampler(Shards(), seed=21))
    whole_epoch1 = EpochSampler(Shards(), seed=21)
    whole_epoch1.set_epoch(1)
    order = list(whole_epoch1)
    assert seen == order[:20] and parts[0] == order[20::2] and parts[1] == order[21::2]
    assert whole != order
