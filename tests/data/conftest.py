"""Fixtures for the packed-dataset tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from packdata_helpers import write_csv, write_images
from tests.tracking.s3_helpers import S3Server


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


@pytest.fixture(scope="module")
def s3_server() -> Iterator[S3Server]:
    """A real S3 server (moto) on 127.0.0.1, one per test module."""
    server = S3Server()
    server.start()
    yield server
    server.stop()


@pytest.fixture()
def s3(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The module's S3 server, with the environment pointing every client at it."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return s3_server
