"""A Trainer run resumed mid-epoch on another number of processes (2 -> 1, 1 -> 2) reads
each sample of the interrupted epoch exactly once, through the real Trainer, its
checkpoints and ``resume_from``; the next epoch is whole.

Every sample carries its own index in its first feature (the model ignores it), and a
callback records the indices of each training batch, so what is checked is what the
training steps received. 48 samples at 4 per process: what is left of the epoch is
always a multiple of the number of processes, so :class:`EpochSampler` pads nothing here
(it would repeat samples from the start of the epoch's order to even out the ranks).

This file is also the training job: ``python test_world_size_resume.py OUT CKPT MODE
STOP_AT`` trains in every process started by torchrun and writes ``OUT/MODE{rank}.json``.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

JOB = str(Path(__file__).resolve())
NUM_SAMPLES, BATCH, EPOCHS, SEED = 48, 4, 2, 5


class IgnoresIndex(nn.Module):
    """A tiny classifier that drops the first feature (the sample's index)."""

    def __init__(self) -> None:
        super().__init__()
        with torch.random.fork_rng():
            torch.manual_seed(0)
            self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x[:, 1:])


def dataset() -> TensorDataset:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(NUM_SAMPLES, 9, generator=g)
    y = (x[:, 1] - x[:, 3] > 0).long() + (x[:, 5] > 0.7).long()
    x[:, 0] = torch.arange(NUM_SAMPLES, dtype=x.dtype)
    return TensorDataset(x, y)


def write_pack(root: Path) -> Path:
    """The same samples as a pack (a 2x2 image, ``idx``, ``label`` and eight features),
    which the Trainer reads with the pack's threaded loader."""
    from PIL import Image

    from scramjet.data import pack

    x, y = dataset().tensors
    root.mkdir()
    Image.new("RGB", (2, 2)).save(root / "blank.png")
    head = ["image", "idx", "label", *(f"f{k}" for k in range(1, 9))]
    rows = [["blank.png", str(i), str(int(y[i]))] + [repr(float(v)) for v in x[i, 1:]]
            for i in range(NUM_SAMPLES)]  # fmt: skip
    (root / "list.csv").write_text("\n".join(",".join(r) for r in [head, *rows]) + "\n")
    pack(root, root / "list.csv", root.parent / "rows.pack", height=2, width=2, shards=3,
         dtype=["int64", "int64"] + ["float32"] * 8, workers=0, progress=False)  # fmt: skip
    return root.parent / "rows.pack"


def as_tensors(batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(features with the index first, labels) of a batch of either dataset."""
    if isinstance(batch, dict):
        columns = [batch["idx"], *(batch[f"f{k}"] for k in range(1, 9))]
        return torch.stack([c.float() for c in columns], 1), batch["label"]
    return batch[0], batch[1]


def job(out: Path, ckpt: Path, mode: str, stop_at: int, packed: str = "") -> None:
    """Train (``mode`` "first": fresh, stopping after update ``stop_at``, which is saved;
    "resumed": from the newest checkpoint of ``ckpt`` to the end) and write what this
    process read, per training step. ``packed``: read that pack instead of the tensors."""
    from scramjet import Trainer
    from scramjet.callbacks import SaveTrainingStateCallback, TrainerCallback
    from scramjet.data import PackedDataset
    from scramjet.data._threads import ThreadedLoader
    from scramjet.runtime import distributed as dist

    class EitherTrainer(Trainer):
        def calculate_train_batch_loss(self, batch: Any) -> dict[str, Any]:
            x, y = as_tensors(batch)
            outputs = self.model(x)
            return {"loss": self.loss_func(outputs, y), "model_outputs": outputs,
                    "batch_size": len(y)}  # fmt: skip

    class Record(TrainerCallback):
        """Records (epoch, indices) of every training batch; stops after ``stop_at``."""

        def __init__(self) -> None:
            self.read: list[tuple[int, list[int]]] = []
            self.started_at = -1

        def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
            self.started_at = trainer.state.global_step

        def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
            indices = as_tensors(kwargs["batch"])[0][:, 0].long().tolist()
            self.read.append((trainer.state.epoch, indices))
            assert isinstance(trainer._train_dl, ThreadedLoader) == bool(packed)

        def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
            if trainer.state.global_step == stop_at:  # after the checkpoint of this step
                trainer.stop_training()

    record = Record()
    # the checkpoint callback first: the step is saved before the stop is asked for
    save = SaveTrainingStateCallback(ckpt, every_n_steps=stop_at, every_n_epochs=None)
    model = IgnoresIndex()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    trainer = EitherTrainer(model, nn.CrossEntropyLoss(), opt, callbacks=[save, record], seed=SEED)
    trainer.train(
        PackedDataset(packed) if packed else dataset(),
        num_epochs=EPOCHS,
        per_device_batch_size=BATCH,
        resume_from=str(ckpt) if mode == "resumed" else None,
    )
    result = {
        "read": record.read,
        "started_at": record.started_at,
        "step": trainer.state.global_step,
        "world": dist.get_world_size(),
    }
    (out / f"{mode}{dist.get_rank()}.json").write_text(json.dumps(result))


def run(
    tmp_path: Path, mode: str, stop_at: int, nproc: int, packed: str = ""
) -> list[dict[str, Any]]:
    """Run the job in ``nproc`` processes (torchrun for 2, this process for 1)."""
    ckpt = tmp_path / "ckpt"
    if nproc == 1:
        job(tmp_path, ckpt, mode, stop_at, packed)
    else:
        from tests.common.torchrun import run_torchrun

        args = (str(tmp_path), str(ckpt), mode, str(stop_at), packed)
        done = run_torchrun(JOB, *args, nproc=nproc)
        assert done.returncode == 0, done.stderr[-4000:]
    return [json.loads((tmp_path / f"{mode}{r}.json").read_text()) for r in range(nproc)]


def epoch_order(epoch: int) -> list[int]:
    """The epoch's global order (the same whatever the number of processes)."""
    from scramjet.trainer.data_order import EpochSampler

    sampler = EpochSampler(range(NUM_SAMPLES), seed=SEED)
    sampler.set_epoch(epoch)
    return list(sampler)


def read_in(parts: list[dict[str, Any]], epoch: int) -> list[list[int]]:
    """Per rank, the indices read in ``epoch``, in order."""
    return [[i for e, batch in part["read"] if e == epoch for i in batch] for part in parts]


@pytest.mark.distributed
@pytest.mark.filterwarnings("ignore:The checkpoint was saved by")  # rank 0's RNG: expected
@pytest.mark.parametrize(
    ("first_world", "resumed_world", "data"),
    # 2 -> 1 on tensors runs with the slow tests: 2 -> 1 on a pack and 1 -> 2 cover it
    [pytest.param(2, 1, "tensors", marks=pytest.mark.slow), (1, 2, "tensors"), (2, 1, "pack")],
    ids=["2to1", "1to2", "2to1-pack"],
)
def test_resume_mid_epoch_on_another_number_of_processes(
    tmp_path: Path, first_world: int, resumed_world: int, data: str
) -> None:
    from scramjet.checkpoint import CheckpointManager

    packed = str(write_pack(tmp_path / "rows")) if data == "pack" else ""
    stop_at = 3 if first_world == 2 else 5  # 24 or 20 of the epoch's 48 samples
    first = run(tmp_path, "first", stop_at, first_world, packed)
    assert all(part["step"] == stop_at and part["world"] == first_world for part in first)
    assert CheckpointManager(tmp_path / "ckpt", keep_last=None).checkpoints()[-1].step == stop_at
    before = read_in(first, 0)
    assert all(e == 0 for part in first for e, _ in part["read"])
    consumed = stop_at * BATCH * first_world
    assert sum(map(len, before)) == consumed

    resumed = run(tmp_path, "resumed", stop_at, resumed_world, packed)
    per_epoch = NUM_SAMPLES // (BATCH * resumed_world)
    # what is left, split among the processes; the last batch may be short (1 -> 2:
    # 28 samples, 14 per rank, batches of 4, 4, 4, 2)
    left = math.ceil((NUM_SAMPLES - consumed) / resumed_world / BATCH)
    for part in resumed:
        assert part["world"] == resumed_world and part["started_at"] == stop_at
        assert part["step"] == stop_at + left + per_epoch  # the rest of epoch 0, then epoch 1
    after = read_in(resumed, 0)

    # the interrupted epoch: every sample exactly once, before or after the resume
    seen = [i for rank in before + after for i in rank]
    assert sorted(seen) == list(range(NUM_SAMPLES))
    # in the epoch's one global order: the saving run read its head, rank r of the
    # resumed run reads positions r, r + W, ... of the rest
    order = epoch_order(0)
    assert sorted(i for rank in before for i in rank) == sorted(order[:consumed])
    for r, rank in enumerate(after):
        assert rank == order[consumed:][r::resumed_world]
    # the next epoch is whole, and split the same way
    whole = read_in(resumed, 1)
    assert sorted(i for rank in whole for i in rank) == list(range(NUM_SAMPLES))
    for r, rank in enumerate(whole):
        assert rank == epoch_order(1)[r::resumed_world]


if __name__ == "__main__":
    out_dir, ckpt_dir, job_mode, stop, pack_path = (*sys.argv[1:6], "")[:5]
    job(Path(out_dir), Path(ckpt_dir), job_mode, int(stop), pack_path)
