"""The Trainer with a threaded pack loader: reshuffled per epoch, exact mid-epoch resume.

The loader is passed as ``train_dataset`` and used as given. Every epoch the Trainer
calls its ``set_epoch`` and ``sampler.set_start``; a run that crashes during optimizer
step 7 (batches of 3, 4 per epoch) and resumes from the checkpoint of step 6, in the
second epoch, sees exactly the samples of the uninterrupted run from step 7 on, and ends
with its weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from pack_trainer_helpers import CrashAt, PackTrainer, Seen
from packdata_helpers import write_csv
from torch import nn
from torch.utils.data import DataLoader, default_collate

from scramjet import Trainer
from scramjet.callbacks import SaveTrainingStateCallback, TrainerCallback
from scramjet.data import PackedDataset, pack
from scramjet.data._threads import ThreadedLoader
from scramjet.trainer.data_order import EpochSampler


@pytest.fixture
def pack_path(folder: tuple[Path, Any], tmp_path: Path) -> Path:
    root, imgs = folder
    rows = [[name, str(i % 4), str(i)] for i, (name, _) in enumerate(imgs)]
    write_csv(root / "indexed.csv", ["image", "label", "idx"], rows)
    pack(
        root, root / "indexed.csv", tmp_path / "t.pack", dtype=["int64", "int64"], height=32,
        width=40, encode="jpeg", shards=3, workers=0, progress=False,
    )  # fmt: skip
    return tmp_path / "t.pack"


def run(
    path: Path, callbacks: list[Any], resume_from: Path | None = None, cache: Path | None = None
) -> PackTrainer:
    if cache is None:
        loader = PackedDataset(path).loader(
            3, shuffle=True, generator=torch.Generator().manual_seed(5), num_workers=2
        )
    else:  # streamed, in the Trainer's shard-window order (which skips on resume itself)
        ds = PackedDataset(f"file://{path}", cache_dir=cache, shuffle_window=2)
        loader = ds.loader(3, sampler=EpochSampler(ds, seed=5), num_workers=2)
    assert isinstance(loader, ThreadedLoader)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = nn.Linear(32 * 40 * 3, 4)
    trainer = PackTrainer(
        model,
        nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
        callbacks=callbacks,
        seed=0,
    )
    trainer.train(loader, num_epochs=2, resume_from=resume_from)
    return trainer


@pytest.mark.parametrize("streamed", [False, True], ids=["local", "streamed"])
def test_training_resumes_mid_epoch_on_the_same_samples(
    pack_path: Path, tmp_path: Path, streamed: bool
) -> None:
    cache = tmp_path / "cache" if streamed else None
    whole = Seen()
    reference = run(pack_path, [whole], cache=cache)
    epochs = [sorted(i for e, idx in whole.steps if e == k for i in idx) for k in (0, 1)]
    assert epochs == [list(range(12))] * 2  # every sample once per epoch
    orders = [[i for e, idx in whole.steps if e == k for i in idx] for k in (0, 1)]
    assert orders[0] != orders[1]  # reshuffled every epoch
    saves = SaveTrainingStateCallback(
        tmp_path / "ckpt", every_n_steps=3, every_n_epochs=None, async_write=False
    )
    with pytest.raises(RuntimeError, match="simulated crash"):
        run(pack_path, [saves, CrashAt(7)], cache=cache)
    after = Seen()
    resumed = run(pack_path, [after], resume_from=tmp_path / "ckpt", cache=cache)
    assert after.steps == whole.steps[6:]
    want, got = reference.unwrapped_model.state_dict(), resumed.unwrapped_model.state_dict()
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=0, atol=0, msg=key)


class EvalSeen(TrainerCallback):
    def __init__(self) -> None:
        self.order: list[int] = []

    def on_eval_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.order += kwargs["batch"]["idx"].tolist()


class PackEvalTrainer(PackTrainer):
    def calculate_eval_batch_loss(self, batch: dict[str, Any]) -> dict[str, Any]:
        return self.calculate_train_batch_loss(batch)

    def predict_step(self, batch: dict[str, Any]) -> torch.Tensor:
        assert isinstance(self.model(batch["image"].float().flatten(1)), torch.Tensor)
        return batch["idx"]


def test_the_trainer_reads_a_pack_it_is_given_with_threads_and_the_same_batches(
    pack_path: Path,
) -> None:
    """Given a PackedDataset, the Trainer builds the pack's threaded loader (threads read
    ahead of the loop instead of the loop reading): the batches and the trained weights
    are those of a DataLoader over the same pack (kept by a collate_fn, which threads do
    not take), and evaluation reads every sample once, in order."""

    def fit(kwargs: dict[str, Any] | None) -> tuple[PackEvalTrainer, Seen, EvalSeen]:
        with torch.random.fork_rng():
            torch.manual_seed(0)
            model = nn.Linear(32 * 40 * 3, 4)
        seen, evals = Seen(), EvalSeen()
        trainer = PackEvalTrainer(
            model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.05),
            callbacks=[seen, evals], seed=0,
        )  # fmt: skip
        ds = PackedDataset(pack_path)
        trainer.train(ds, num_epochs=2, per_device_batch_size=3, eval_dataset=ds,
                      train_dataloader_kwargs=kwargs, eval_dataloader_kwargs=kwargs)  # fmt: skip
        return trainer, seen, evals

    threaded, a, eval_a = fit(None)
    plain, b, eval_b = fit({"collate_fn": default_collate})
    assert isinstance(threaded._train_dl, ThreadedLoader)
    assert isinstance(threaded._eval_dl, ThreadedLoader)
    assert isinstance(plain._train_dl, DataLoader) and isinstance(plain._eval_dl, DataLoader)
    assert a.steps == b.steps and len(a.steps) == 8
    assert eval_a.order == eval_b.order == list(range(12)) * 2
    want, got = plain.unwrapped_model.state_dict(), threaded.unwrapped_model.state_dict()
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=0, atol=0, msg=key)
    # predictions come back in dataset order, as through a DataLoader
    idx = threaded.predict(PackedDataset(pack_path), 5)
    assert idx.tolist() == list(range(12))
    torch.testing.assert_close(
        threaded.predict(PackedDataset(pack_path), 5, {"collate_fn": default_collate}), idx
    )
