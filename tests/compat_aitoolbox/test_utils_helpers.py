"""AIToolbox's utils: metadata joining, dict flattening, folders and archives, function copies."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from scramjet.compat.aitoolbox.utils import dict_util, file_system, util


def test_metadata_batches_join_by_kind() -> None:
    joined = dict_util.combine_prediction_metadata_batches(
        [
            {"ids": [1, 2], "emb": torch.ones(2, 3), "w": np.zeros(2)},
            {"ids": [3], "emb": torch.zeros(1, 3)},
        ]
    )
    assert joined["ids"] == [1, 2, 3] and joined["emb"].shape == (3, 3)
    assert joined["emb"][2].sum() == 0 and joined["w"].shape == (2,)
    with pytest.raises(TypeError, match="'bad'"):
        dict_util.combine_prediction_metadata_batches([{"bad": "text"}])
    assert dict_util.flatten_dict({"a": {"b": {"c": 1}}, "d": 2}) == {"a_b_c": 1, "d": 2}
    assert dict_util.flatten_combine_dict({"r": [{"p": 1}, {"p": 2}], "loss": [0.1]}) == {
        "r_p": [1, 2],
        "loss": [0.1],
    }


def test_folders_and_zip_round_trip(tmp_path: Path) -> None:
    leaf, chain = file_system.create_folder_hierarchy(str(tmp_path), ["a", "b"])
    assert chain == [str(tmp_path), str(tmp_path / "a"), leaf] and Path(leaf).is_dir()
    (Path(leaf) / "f.txt").write_text("content")
    archive = file_system.zip_folder(str(tmp_path / "a"), str(tmp_path / "out.zip"))
    assert archive == str(tmp_path / "out.zip")
    assert zipfile.ZipFile(archive).namelist() == ["b/", "b/f.txt"]
    file_system.unzip_file(archive, str(tmp_path / "back"))
    assert (tmp_path / "back" / "b" / "f.txt").read_text() == "content"
    with pytest.raises(ValueError, match="does not exist"):
        file_system.create_folder_hierarchy(str(tmp_path / "missing"), ["x"])


class Source:
    factor = 2

    def scaled(self, x: int) -> int:
        return x * self.factor

    def empty(self) -> None:
        """Nothing."""


class Target:
    factor = 5


def test_copied_method_runs_on_another_object() -> None:
    copied = util.copy_function(Source().scaled)
    assert copied(Target(), 3) == 15
    assert util.is_empty_function(Source().empty) and not util.is_empty_function(Source().scaled)
    assert util.function_exists(Source(), "scaled") and not util.function_exists(Source(), "factor")
