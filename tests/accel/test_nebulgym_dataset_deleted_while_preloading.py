"""Dropping a ``@patch_dataset`` dataset while its preloaders still decode.

A user who builds a dataset per trial (a search loop) and drops it before the background
preloaders finished expects silence: the cache is gone because it was released, not because
something removed its folders.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

_SCRIPT = textwrap.dedent(
    """
    import gc, time
    import torch
    from torch.utils.data import Dataset
    from scramjet.compat.nebulgym import patch_dataset

    @patch_dataset(preloaded_data=1)
    class Slow(Dataset):
        def __getitem__(self, i):
            time.sleep(0.002)
            return torch.full((256,), float(i))

        def __len__(self):
            return 2000

    data = Slow()
    assert data[0][0].item() == 0.0
    time.sleep(0.3)  # the preloader is decoding ahead
    del data
    gc.collect()
    time.sleep(1.0)  # what the preloader does after the release
    print("done")
    """
)


def test_dropping_a_preloading_dataset_is_silent() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "done" in done.stdout
    assert "cannot be written" not in done.stderr, done.stderr
