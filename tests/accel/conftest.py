from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

# Spawned DataLoader workers import accel_helpers by name: keep this folder importable.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
