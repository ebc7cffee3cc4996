"""Seeding is explicit: same seed → same run (workers included); nothing seeded otherwise."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import torch
from tests.common.world import NoisyDataset, TinyMLP, blobs, make_trainer

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback


class BatchLog(TrainerCallback):
    """Keeps every training batch's inputs (which carry the workers' random noise)."""

    def __init__(self) -> None:
        self.inputs: list[torch.Tensor] = []

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.inputs.append(kwargs["batch"][0].clone())


def _run(
    seed: int | None, workers: int = 0, epochs: int = 2
) -> tuple[list[torch.Tensor], torch.Tensor]:
    log = BatchLog()
    model = TinyMLP()
    trainer = make_trainer(model, callbacks=[log], seed=seed)
    trainer.train(
        NoisyDataset(blobs(n=24)),
        num_epochs=epochs,
        per_device_batch_size=4,
        train_dataloader_kwargs={"num_workers": workers},
    )
    return log.inputs, torch.cat([p.detach().flatten() for p in model.parameters()])


def test_same_seed_same_run_with_dataloader_workers() -> None:
    inputs_a, weights_a = _run(seed=7, workers=2, epochs=1)
    inputs_b, weights_b = _run(seed=7, workers=2, epochs=1)
    assert len(inputs_a) == 6
    for a, b in zip(inputs_a, inputs_b):
        assert torch.equal(a, b)
    assert torch.equal(weights_a, weights_b)
    # The noise really is random per sample: the same batch differs from the clean data.
    clean = blobs(n=24).tensors[0]
    assert not any(torch.equal(row, c) for row in inputs_a[0] for c in clean)
    inputs_c, weights_c = _run(seed=8, workers=2, epochs=1)
    assert not torch.equal(weights_a, weights_c)
    assert all(not torch.equal(a, c) for a, c in zip(inputs_a, inputs_c))


def test_epochs_draw_fresh_noise() -> None:
    inputs, _ = _run(seed=3)
    first = torch.cat(inputs[:6]).sort(dim=0).values
    second = torch.cat(inputs[6:]).sort(dim=0).values
    assert not torch.allclose(first, second)


def test_no_seed_means_no_global_seeding_and_runs_differ() -> None:
    py_state, np_state = random.getstate(), np.random.get_state()
    torch.manual_seed(1234)
    expected_next = torch.rand(3)
    torch.manual_seed(1234)
    _, weights_a = _run(seed=None)
    _, weights_b = _run(seed=None)
    assert not torch.equal(weights_a, weights_b), "two unseeded runs shuffle differently"
    assert random.getstate() == py_state, "Python's RNG untouched"
    assert np.array_equal(np.random.get_state()[1], np_state[1]), "NumPy's RNG untouched"
    # train() did not reset the global generator (to 42 or to anything else fixed).
    continued = torch.rand(3)
    torch.manual_seed(42)
    assert not torch.equal(continued, torch.rand(3))
    assert not torch.equal(continued, expected_next)


def test_unseeded_runs_follow_the_users_global_seed() -> None:
    torch.manual_seed(99)
    _, weights_a = _run(seed=None)
    torch.manual_seed(99)
    _, weights_b = _run(seed=None)
    assert torch.equal(weights_a, weights_b)


def test_import_seeds_nothing() -> None:
    code = textwrap.dedent(
        """
        import random
        import numpy as np
        import torch
        t, p, n = torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy()
        import scramjet, scramjet.trainer, scramjet.callbacks, scramjet.schedulers
        from scramjet import Trainer, seed_everything
        assert torch.equal(t, torch.get_rng_state()), "torch RNG changed by import"
        assert p == random.getstate(), "random changed by import"
        assert (n == np.random.get_state()[1]).all(), "numpy changed by import"
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
