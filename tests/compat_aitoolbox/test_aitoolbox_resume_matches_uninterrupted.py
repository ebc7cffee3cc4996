"""A run continued from a ``TrainLoopCheckpoint`` epoch checkpoint equals the uninterrupted one.

The continued script need not seed torch as the first one did: shuffled batches and
dropout masks follow the saved run, not the new process's random state.
"""

from __future__ import annotations

from pathlib import Path

import torch
from aitb_helpers import dataset
from torch import nn
from torch.utils.data import DataLoader

from scramjet.compat.aitoolbox import TrainLoopCheckpoint, TTModel
from scramjet.compat.aitoolbox.torchtrain.callbacks.model_load import ModelLoadContinueTraining
from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoop


class DropoutNet(TTModel):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def get_loss(self, batch_data, criterion, device):
        x, y = batch_data
        return criterion(self(x.to(device)), y.to(device))

    def get_predictions(self, batch_data, device):
        x, y = batch_data
        return self(x.to(device)).argmax(dim=1), y, {}


def _parts(seed: int) -> tuple[DropoutNet, torch.optim.Optimizer, DataLoader, DataLoader]:
    torch.manual_seed(seed)
    model = DropoutNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    train = DataLoader(dataset(40, 0), batch_size=8, shuffle=True)
    return model, optimizer, train, DataLoader(dataset(16, 1), batch_size=8)


def test_continuing_a_shuffled_dropout_run_equals_the_uninterrupted_run(tmp_path: Path) -> None:
    model, optimizer, train, val = _parts(seed=0)
    full = TrainLoopCheckpoint(
        model, train, val, None, optimizer, nn.CrossEntropyLoss(),
        "proj", "exp", str(tmp_path), {}, cloud_save_mode=None,
    )  # fmt: skip
    full.fit(num_epochs=3)

    model2, optimizer2, train2, val2 = _parts(seed=123)  # another process, another seed
    cont = TrainLoop(model2, train2, val2, None, optimizer2, nn.CrossEntropyLoss())
    load = ModelLoadContinueTraining(
        full.experiment_timestamp,
        epoch_num=0,  # saved at the end of the first epoch
        project_name="proj",
        experiment_name="exp",
        local_model_result_folder_path=str(tmp_path),
        cloud_save_mode="local",
    )
    cont.fit(num_epochs=3, callbacks=[load])

    assert cont.train_history["accumulated_loss"] == full.train_history["accumulated_loss"][1:]
    for (name, a), (_, b) in zip(
        model.state_dict().items(), model2.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), f"{name} differs by {(a - b).abs().max().item():.3g}"
    checkpoint = next((tmp_path / "proj").glob("exp_*/checkpoint_model/*_E0.pth"))
    torch.load(checkpoint, weights_only=True)  # the saved RNG states keep it weights-only
