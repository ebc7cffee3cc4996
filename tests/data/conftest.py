"""Fixtures for the packed-dataset tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from packdata_helpers import write_csv, write_images
from tests.tracking.s3_helpers import s3, s3_server  # noqa: F401  (fixtures for the S3 tests)


@pytest.fixture
def folder(tmp_path: Path) -> tuple[Path, list[tuple[str, np.ndarray]]]:
    """Twelve 32x40 PNG images with a label CSV (image, label) in ``tmp_path/imgs``."""
    imgs = write_images(tmp_path / "imgs", 12)
    write_csv(
        tmp_path / "imgs" / "list.csv",
        ["image", "label"],
        [[name, str(i % 4)] for i, (name, _) in enumerate(imgs)],
    )
    return tmp_path / "imgs", imgs
