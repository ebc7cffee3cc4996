"""The Trainer given a pack's worker-process loader, or a DataLoader over a pack.

``ds.loader(..., backend="processes")`` (what ``"auto"`` picks with a transform) is used
as given, like the threaded loader: every epoch the Trainer selects the epoch's order and
the augmentations' epoch, and a mid-epoch resume skips the consumed samples, so a run
that crashes and resumes sees the batches of the uninterrupted run. A plain DataLoader
over a pack with a transform gets the dataset's ``set_epoch`` every epoch too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from pack_trainer_helpers import CrashAt, PackTrainer, Seen
from packdata_helpers import write_csv
from torch import nn
from torch.utils.data import DataLoader

from scramjet.callbacks import SaveTrainingStateCallback
from scramjet.data import PackedDataset, pack
from scramjet.data import augment as A


@pytest.fixture
def pack_path(folder: tuple[Path, Any], tmp_path: Path) -> Path:
    """12 raw 32x40 images in 3 shards; ``idx`` is the row."""
    root, imgs = folder
    rows = [[name, str(i % 4), str(i)] for i, (name, _) in enumerate(imgs)]
    write_csv(root / "indexed.csv", ["image", "label", "idx"], rows)
    pack(
        root, root / "indexed.csv", tmp_path / "p.pack", dtype=["int64", "int64"], height=32,
        width=40, encode="raw", shards=3, workers=0, progress=False,
    )  # fmt: skip
    return tmp_path / "p.pack"


def train(loader: Any, callbacks: list[Any], resume_from: Path | None = None) -> PackTrainer:
    """Two epochs over ``loader``, used as given (the Trainer's default batch size is not
    the loader's 3: skipping on resume must count the loader's own batches)."""
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


PROCESS_LOADERS = [
    pytest.param({"num_workers": 0}, id="in-process"),
    pytest.param({"num_workers": 1, "persistent_workers": True}, id="persistent-worker"),
]


@pytest.mark.parametrize("settings", PROCESS_LOADERS)
def test_a_process_loader_reshuffles_and_resumes_mid_epoch_like_the_threaded_one(
    pack_path: Path, tmp_path: Path, settings: dict[str, Any]
) -> None:
    def loader(backend: str) -> Any:
        options = settings if backend == "processes" else {}
        generator = torch.Generator().manual_seed(5)
        ds = PackedDataset(pack_path)
        return ds.loader(3, shuffle=True, generator=generator, backend=backend, **options)

    assert not isinstance(loader("processes"), PackedDataset)
    whole = Seen()
    reference = train(loader("processes"), [whole])
    orders = [[i for e, idx in whole.steps if e == k for i in idx] for k in (0, 1)]
    assert [sorted(order) for order in orders] == [list(range(12))] * 2
    assert orders[0] != orders[1]  # reshuffled every epoch
    threaded = Seen()
    train(loader("threads"), [threaded])
    assert threaded.steps == whole.steps  # the same batches for the same sampler

    saves = SaveTrainingStateCallback(
        tmp_path / "ckpt", every_n_steps=3, every_n_epochs=None, async_write=False
    )
    with pytest.raises(RuntimeError, match="simulated crash"):
        train(loader("processes"), [saves, CrashAt(7)])  # step 7: mid second epoch
    after = Seen()
    resumed = train(loader("processes"), [after], resume_from=tmp_path / "ckpt")
    assert after.steps == whole.steps[6:]
    want, got = reference.unwrapped_model.state_dict(), resumed.unwrapped_model.state_dict()
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=0, atol=0, msg=key)


def augmented(path: Path) -> PackedDataset:
    ops = A.Compose(A.Flip(horizontal=True, vertical=True), A.Brighten(0.4), seed=3)
    return PackedDataset(path, transform={"image": ops})


@pytest.mark.parametrize("kind", ["pack-loader", "dataloader"])
def test_every_epoch_draws_its_own_augmentations_through_a_given_loader(
    pack_path: Path, kind: str
) -> None:
    ds = augmented(pack_path)
    if kind == "pack-loader":  # a transform: "auto" reads in worker processes
        loader: Any = ds.loader(4, shuffle=True, num_workers=1)
        assert isinstance(loader, DataLoader)
    else:
        loader = DataLoader(ds, batch_size=4, shuffle=True, num_workers=1)
    seen = Seen()
    train(loader, [seen])
    assert ds.epoch == 1
    reference = augmented(pack_path)
    for epoch in (0, 1):
        reference.set_epoch(epoch)
        for i in range(12):
            want = torch.as_tensor(np.asarray(reference[i]["image"]))
            assert torch.equal(seen.images[epoch, i], want), (epoch, i)
    changed = [i for i in range(12) if not torch.equal(seen.images[0, i], seen.images[1, i])]
    assert changed  # the draws of epoch 1 are not those of epoch 0
