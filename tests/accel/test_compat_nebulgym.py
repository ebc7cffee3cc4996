from __future__ import annotations

import inspect
import os

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

import scramjet.compat.nebulgym as ng


def make_images(folder: str, n: int, seed: int = 0) -> list[str]:
    """Two classes of noisy 224x224 PNGs: class 1 has a bright square in the centre."""
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(n):
        label = i % 2
        img = rng.integers(0, 160, size=(224, 224, 3), dtype=np.uint8)
        if label:
            img[64:160, 64:160] = np.clip(img[64:160, 64:160].astype(int) + 90, 0, 255)
        path = os.path.join(folder, f"img_{i:04d}_{label}.png")
        Image.fromarray(img).save(path)
        paths.append(path)
    return paths


def label_of(path: str) -> int:
    return int(path.rsplit("_", 1)[1][0])


def read_image(path: str) -> torch.Tensor:
    with Image.open(path) as img:
        arr = np.asarray(img.convert("RGB"), dtype=np.float32) / 255.0
    return torch.from_numpy(arr).permute(2, 0, 1)


def test_seed_readme_example_learns_with_only_the_import_changed(tmp_path):
    from seed_readme_example import CustomDataset, CustomModel

    torch.manual_seed(0)
    paths = make_images(str(tmp_path), 80)
    train = CustomDataset(paths[:64], label_of, read_image)
    val = CustomDataset(paths[64:], label_of, read_image)
    model = CustomModel()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for _ in range(3):
        model.train()
        for x, y in DataLoader(train, batch_size=8, shuffle=True):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        hits = sum(int((model(x).argmax(1) == y).sum()) for x, y in DataLoader(val, batch_size=8))
    assert hits / 16 >= 0.9
    assert train.cache_stats()["in_memory"] == 64
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def _named(fn):
    """The parameters nebulgym's own signature has (scramjet's keywords come as **options)."""
    params = inspect.signature(fn).parameters.values()
    return [p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD]


def test_seed_names_and_signatures():
    assert _named(ng.NebulDataset) == ["input_data", "preloaded_data", "max_memory_size"]
    assert list(inspect.signature(ng.TrainingLearner).parameters)[:2] == ["model", "backends"]
    for fn in (ng.accelerate_model, ng.patch_torch_module):
        # nebulgym's order: accelerate_model(patch_backprop=True, reduce_memory=False,
        # **nebulgym_kwargs) with backends among the keywords; backend names given second
        # (this layer's earlier order) are still read as backends
        assert list(inspect.signature(fn).parameters) == [
            "patch_backprop",
            "reduce_memory",
            "backends",
        ]
    for fn in (ng.accelerate_dataset, ng.patch_dataset):
        assert _named(fn) == ["preloaded_data", "max_memory_size"]
    with pytest.warns(UserWarning, match="cannot hold the cache index"):
        data = ng.NebulDataset(
            [torch.ones(2), torch.zeros(2)], preloaded_data=1, max_memory_size=10
        )
    assert torch.equal(data[1], torch.zeros(2))
    learner = ng.TrainingLearner(torch.nn.Linear(2, 1), ["RAMMER", "PYTORCH"])
    with pytest.warns(UserWarning, match="RAMMER"):
        learner(torch.ones(3, 2))


def _hidden_grad_rows(decorator: object) -> int:
    """Rows of the hidden Linear's weight gradient that are non-zero after one backward."""

    @decorator  # type: ignore[operator]
    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.hidden = torch.nn.Linear(32, 256)
            self.head = torch.nn.Linear(256, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(torch.relu(self.hidden(x)))

    torch.manual_seed(0)
    net = Net()
    net(torch.randn(16, 32)).square().sum().backward()
    return int((net.hidden.weight.grad.abs().sum(dim=1) > 0).sum())


def test_patch_backprop_is_on_by_default_as_nebulgym_documents():
    from scramjet.compat.nebulgym.annotations import torch_annotations as ta

    assert ta.patch_torch_module is ng.patch_torch_module
    assert inspect.signature(ng.patch_torch_module).parameters["patch_backprop"].default is True
    # Default: meProp keeps the top 10% of the 256 hidden units per batch (26 rows).
    assert _hidden_grad_rows(ta.patch_torch_module(backends=["PYTORCH"])) == 26
    # Opting out gives the exact dense backward: every hidden unit gets gradient.
    dense = _hidden_grad_rows(ta.patch_torch_module(backends=["PYTORCH"], patch_backprop=False))
    assert dense > 200
    # The core decorator keeps the exact backward unless asked.
    from scramjet.accel import accelerate_model

    assert _hidden_grad_rows(accelerate_model(backends=["PYTORCH"])) == dense


def test_positional_arguments_mean_what_they_meant_in_nebulgym():
    # nebulgym: accelerate_model(patch_backprop=True, ...), patch_torch_module(patch_backprop,
    # ...); backends came by keyword. A list first (this layer's earlier order) still works.
    dense = _hidden_grad_rows(ng.accelerate_model(backends=["PYTORCH"], patch_backprop=False))
    assert _hidden_grad_rows(ng.accelerate_model(False, ["PYTORCH"])) == dense
    assert _hidden_grad_rows(ng.patch_torch_module(True, backends=["PYTORCH"])) == 26
    assert _hidden_grad_rows(ng.accelerate_model(["PYTORCH"], False)) == dense
    assert _hidden_grad_rows(ng.accelerate_model(["PYTORCH"])) == 26


def test_decorator_misuse_is_explained():
    class Net(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x

    class Data(torch.utils.data.Dataset):
        def __getitem__(self, i: int) -> int:
            return i

        def __len__(self) -> int:
            return 3

    for decorator, cls in (
        (ng.patch_torch_module, Net),
        (ng.accelerate_model, Net),
        (ng.patch_dataset, Data),
        (ng.accelerate_dataset, Data),
    ):
        with pytest.raises(TypeError, match=rf"@{decorator.__name__}\(\)"):
            decorator(cls)  # @patch_torch_module without parentheses
    with pytest.raises(TypeError, match="patch_backprop must be True or False"):
        ng.accelerate_model(patch_backprop="False", backends=["PYTORCH"])


def test_nebulgym_decorators_module_path_gives_the_same_names() -> None:
    # nebulgym's own code imports from nebulgym.decorators.torch_decorators as well.
    import scramjet.compat.nebulgym as compat
    from scramjet.compat.nebulgym.decorators import torch_decorators

    for name in ("accelerate_model", "accelerate_dataset", "NebulDataset", "TrainingLearner"):
        assert getattr(torch_decorators, name) is getattr(compat, name), name
