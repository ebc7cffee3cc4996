"""The Trainer's weights equal those of a hand-written PyTorch loop (same data order, SGD, CPU).

The reference below implements the documented semantics on its own: each micro-batch's
mean loss is divided by the number of micro-batches in its accumulation window (the last
window of an epoch may be shorter), gradients are clipped once per update, and
``max_num_train_steps`` counts optimizer updates.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from tests.common.world import TinyMLP, assert_same_weights, blobs, clone, make_trainer
from torch import nn
from torch.utils.data import TensorDataset

N, BATCH, LR = 46, 4, 0.2  # 12 batches per epoch, the last one holds 2 samples


def reference_train(
    model: nn.Module,
    data: TensorDataset,
    *,
    epochs: int,
    accum: int = 1,
    clip_value: float | None = None,
    clip_norm: float | None = None,
    max_steps: int | None = None,
    shuffle_seed: int | None = None,
) -> int:
    """Plain PyTorch training; returns the number of optimizer updates made.

    With ``shuffle_seed`` each epoch visits the samples in ``randperm(n)`` drawn from a
    generator seeded with ``shuffle_seed + epoch`` (the Trainer's documented order).
    """
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    loss_fn = nn.CrossEntropyLoss()
    updates = 0
    for epoch in range(epochs):
        x, y = data.tensors
        if shuffle_seed is not None:
            order = torch.randperm(
                len(y), generator=torch.Generator().manual_seed(shuffle_seed + epoch)
            )
            x, y = x[order], y[order]
        batches = [(x[i : i + BATCH], y[i : i + BATCH]) for i in range(0, len(y), BATCH)]
        for start in range(0, len(batches), accum):
            window = batches[start : start + accum]
            opt.zero_grad()
            for xb, yb in window:
                (loss_fn(model(xb), yb) / len(window)).backward()
            if clip_value is not None:
                nn.utils.clip_grad_value_(model.parameters(), clip_value)
            if clip_norm is not None:
                nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
            opt.step()
            updates += 1
            if max_steps is not None and updates >= max_steps:
                return updates
    return updates


CASES = {
    "plain": {},
    "accumulation, short last window": {"accum": 5},
    "clip value": {"clip_value": 0.05},
    "clip norm": {"clip_norm": 0.1},
    "accumulation + clip value": {"accum": 5, "clip_value": 0.05},
    "accumulation + clip norm": {"accum": 5, "clip_norm": 0.1},
    "accumulation + max steps": {"accum": 5, "max_steps": 7, "epochs": 5},
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_trainer_matches_hand_written_loop(case: str) -> None:
    opts = dict(CASES[case])
    epochs = opts.pop("epochs", 2)
    data = blobs(n=N)
    model = TinyMLP()
    expected = clone(model)
    updates = reference_train(expected, data, epochs=epochs, **opts)

    trainer = make_trainer(model, lr=LR)
    trainer.train(
        data,
        num_epochs=epochs,
        per_device_batch_size=BATCH,
        train_dataloader_kwargs={"shuffle": False},
        gradient_accumulation_steps=opts.get("accum", 1),
        gradient_clip_value=opts.get("clip_value"),
        gradient_clip_norm=opts.get("clip_norm"),
        max_num_train_steps=opts.get("max_steps"),
    )
    assert trainer.state.global_step == updates
    assert_same_weights(model, expected, atol=1e-6)


@pytest.mark.parametrize("accum", [1, 5])
def test_shuffled_training_matches_a_hand_written_loop_with_the_same_seed(accum: int) -> None:
    data = blobs(n=N)
    model = TinyMLP()
    expected, unshuffled = clone(model), clone(model)
    reference_train(expected, data, epochs=3, accum=accum, shuffle_seed=5)
    reference_train(unshuffled, data, epochs=3, accum=accum)
    trainer = make_trainer(model, lr=LR, seed=5)
    trainer.train(
        data, num_epochs=3, per_device_batch_size=BATCH, gradient_accumulation_steps=accum
    )
    assert_same_weights(model, expected, atol=1e-6)
    pairs = zip(expected.parameters(), unshuffled.parameters())
    assert max(float((a - b).detach().abs().max()) for a, b in pairs) > 1e-4, "order matters"


def test_reference_cases_are_distinguishable() -> None:
    """Clipping and accumulation really change the result, so the cases above can fail."""
    data = blobs(n=N)
    base = TinyMLP()
    results = {}
    for case, opts in CASES.items():
        model = clone(base)
        kwargs = {k: v for k, v in opts.items() if k != "epochs"}
        reference_train(model, data, epochs=int(opts.get("epochs", 2)), **kwargs)
        results[case] = torch.cat([p.detach().flatten() for p in model.parameters()])
    names = list(results)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not torch.allclose(results[a], results[b], atol=1e-5), (a, b)


def test_clipping_per_micro_step_would_differ() -> None:
    """Clipping each micro-batch (a known defect elsewhere) gives other weights than the Trainer."""
    data = blobs(n=N)
    model = TinyMLP()
    wrong = clone(model)
    opt = torch.optim.SGD(wrong.parameters(), lr=LR)
    x, y = data.tensors
    batches = [(x[i : i + BATCH], y[i : i + BATCH]) for i in range(0, len(y), BATCH)]
    for start in range(0, len(batches), 5):
        window = batches[start : start + 5]
        opt.zero_grad()
        for xb, yb in window:
            (nn.functional.cross_entropy(wrong(xb), yb) / len(window)).backward()
            nn.utils.clip_grad_norm_(wrong.parameters(), 0.1)
        opt.step()
    trainer = make_trainer(model, lr=LR)
    trainer.train(
        data,
        num_epochs=1,
        per_device_batch_size=BATCH,
        gradient_accumulation_steps=5,
        gradient_clip_norm=0.1,
        train_dataloader_kwargs={"shuffle": False},
    )
    pairs = zip(model.parameters(), wrong.parameters())
    diff = max(float((a - b).detach().abs().max()) for a, b in pairs)
    assert diff > 1e-4


class _Stream(torch.utils.data.IterableDataset):
    """An iterable dataset without a length: the loader cannot tell where the epoch ends."""

    def __init__(self, data: TensorDataset) -> None:
        self.data = data

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(zip(*self.data.tensors))


def test_unknown_length_loader_applies_the_last_short_window() -> None:
    data = blobs(n=N)
    model = TinyMLP()
    expected = clone(model)
    updates = reference_train(expected, data, epochs=2, accum=5)
    trainer = make_trainer(model, lr=LR)
    trainer.train(
        _Stream(data), num_epochs=2, per_device_batch_size=BATCH, gradient_accumulation_steps=5
    )
    assert trainer.state.global_step == updates == 6
    assert_same_weights(model, expected, atol=1e-6)


class _ShortLength(_Stream):
    """An iterable dataset whose ``__len__`` says half of what it yields (an estimate)."""

    def __len__(self) -> int:
        return len(self.data) // 2


@pytest.mark.parametrize("accum", [1, 5])
def test_a_length_that_falls_short_keeps_training_on_the_extra_batches(accum: int) -> None:
    """``__len__`` of an IterableDataset is only a hint to the DataLoader: the stream may go
    on past it. The extra batches are trained in windows of ``accum`` starting where the
    length said the epoch ends (the window the length planned closes there), with one
    warning. They were divided by a window of 0 or less: NaN weights (``accum=1``) or
    gradient ascent on some batches, silently."""
    data = blobs(n=N)  # 12 batches; the length says 23 samples: 6 batches
    model = TinyMLP()
    expected = clone(model)
    opt = torch.optim.SGD(expected.parameters(), lr=LR)
    x, y = data.tensors
    batches = [(x[i : i + BATCH], y[i : i + BATCH]) for i in range(0, N, BATCH)]
    bounds = [*range(0, 6, accum), *range(6, 12, accum), 12]  # windows restart at 6
    for _epoch in range(2):
        for start, end in itertools.pairwise(bounds):
            for xb, yb in batches[start:end]:
                (nn.functional.cross_entropy(expected(xb), yb) / (end - start)).backward()
            opt.step()
            opt.zero_grad()
    trainer = make_trainer(model, lr=LR)
    with pytest.warns(RuntimeWarning, match=r"more batches than its length.*6 batches") as seen:
        trainer.train(
            _ShortLength(data),
            num_epochs=2,
            per_device_batch_size=BATCH,
            gradient_accumulation_steps=accum,
        )
    assert len([w for w in seen if issubclass(w.category, RuntimeWarning)]) == 1
    assert trainer.state.global_step == 2 * (len(bounds) - 1)
    assert_same_weights(model, expected, atol=1e-6)
    losses = trainer.run_history.get_metric_values("train_loss_epoch")
    assert all(loss == loss for loss in losses)  # not NaN
