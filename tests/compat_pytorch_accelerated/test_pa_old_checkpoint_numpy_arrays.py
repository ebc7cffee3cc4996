"""Files written by pytorch-accelerated itself whose checkpoint_kwargs hold numpy arrays.

The peer saved ``checkpoint_kwargs`` as given with plain ``torch.save``; per-class scores
as ``np.array`` are data and load, while object arrays and code stay refused.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from tests.compat_pytorch_accelerated.test_pa_old_checkpoint_numpy_values import (
    _peer_file,
    _trainer,
)

from scramjet.checkpoint import CorruptCheckpointError


def _as_numpy_1(path: Path) -> None:
    """Rewrite the pickle's numpy globals as numpy 1.x named them (``numpy.core``)."""
    with zipfile.ZipFile(path) as archive:
        members = [(info, archive.read(info)) for info in archive.infolist()]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for info, data in members:
            if info.filename.endswith("data.pkl"):
                data = data.replace(b"numpy._core.multiarray\n", b"numpy.core.multiarray\n")
            archive.writestr(info, data)
    path.write_bytes(buffer.getvalue())


@pytest.mark.parametrize("numpy_1_names", [False, True])
def test_numpy_arrays_of_a_peer_file_load(tmp_path: Path, numpy_1_names: bool) -> None:
    source = _trainer()
    with torch.no_grad():
        source.model.weight.fill_(0.5)
    path = tmp_path / "best_model.pt"
    scores = np.array([0.1, 0.2])
    confusion = np.array([[3, 1], [0, 4]], dtype=np.int32)
    _peer_file(
        path,
        source,
        per_class=scores,
        confusion=confusion,
        empty=np.zeros((0,), dtype=np.float32),
        fortran=np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        best=np.float64(0.25),
    )
    if numpy_1_names:
        _as_numpy_1(path)
    target = _trainer()
    values = target.load_checkpoint(path)
    assert torch.equal(target.model.weight, torch.full((2, 3), 0.5))
    assert isinstance(values["per_class"], np.ndarray)
    np.testing.assert_array_equal(values["per_class"], scores)
    assert values["confusion"].dtype == np.int32
    np.testing.assert_array_equal(values["confusion"], confusion)
    assert values["empty"].shape == (0,) and values["empty"].dtype == np.float32
    np.testing.assert_array_equal(values["fortran"], np.arange(6.0).reshape(2, 3))
    assert values["best"] == 0.25


def test_object_arrays_stay_refused_without_calling_the_file_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "best_model.pt"
    _peer_file(path, _trainer(), names=np.array(["cat", 1], dtype=object))
    with pytest.raises(Exception, match=r"object") as raised:
        _trainer().load_checkpoint(path)
    assert not isinstance(raised.value, CorruptCheckpointError)
    assert "corrupt" not in str(raised.value).lower()
    assert "weights_only=False" in str(raised.value)


class _ObjectDtype:
    """Pickles as a bare ``numpy.dtype("O")`` call, without the dtype's own state."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (np.dtype, ("O",))


class _HandMadeObjectArray:
    """Pickles as numpy's array reconstruction, with object elements as its data."""

    def __reduce__(self) -> tuple[object, ...]:
        reconstruct = np.array([0.0]).__reduce__()[0]
        state = (1, (2,), _ObjectDtype(), False, ["cat", 1])
        return (reconstruct, (np.ndarray, (0,), b"b"), state)


def test_a_hand_made_object_array_is_refused_too(tmp_path: Path) -> None:
    path = tmp_path / "best_model.pt"
    _peer_file(path, _trainer(), scores={"names": [_HandMadeObjectArray()]})
    with pytest.raises(Exception, match=r"dtype=object.*weights_only=False") as raised:
        _trainer().load_checkpoint(path)
    assert not isinstance(raised.value, CorruptCheckpointError)
