"""Test-session settings and shared fixtures."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

# Tests import shared helpers as ``tests.common``: keep the repository root importable.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)


@pytest.fixture(autouse=True, scope="session")
def _one_thread() -> Iterator[None]:
    """One intra-op thread: the suite shares a small machine, and results stay deterministic."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def blobs_data() -> torch.utils.data.TensorDataset:
    """A small, learnable 3-class problem (96 samples, 8 features)."""
    from tests.common.world import blobs

    return blobs()


@pytest.fixture
def tiny_model() -> torch.nn.Module:
    """A deterministic 8-16-3 MLP."""
    from tests.common.world import TinyMLP

    return TinyMLP()
