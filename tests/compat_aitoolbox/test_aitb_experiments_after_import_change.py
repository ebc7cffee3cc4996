"""An AIToolbox user's experiments after changing the imports: model contract mistakes,
tracked folders, cloud saving and continued training."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from scramjet.compat.aitoolbox.torchtrain.model import TTModel
from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoop


def _data(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, generator=g)
    return TensorDataset(x, (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long())


class Net(TTModel):
    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2 = nn.Linear(6, 8), nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l2(torch.relu(self.l1(x)))

    def get_loss(self, batch: Any, criterion: Any, device: Any) -> Any:
        x, y = batch
        return criterion(self(x.to(device)), y.to(device))

    def get_predictions(self, batch: Any, device: Any) -> Any:
        x, y = batch
        return self(x.to(device)).argmax(1).cpu(), y.cpu(), {}


def _loop(model: nn.Module, **kwargs: Any) -> TrainLoop:
    train = DataLoader(_data(40, 0), batch_size=16)
    val = DataLoader(_data(20, 1), batch_size=8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return TrainLoop(model, train, val, None, optimizer, nn.CrossEntropyLoss(), **kwargs)


# ----------------------------------------------------------------- the TTModel contract
class ItemLoss(Net):
    """A common slip: get_loss returns the loss as a Python number."""

    def get_loss(self, batch: Any, criterion: Any, device: Any) -> Any:
        return super().get_loss(batch, criterion, device).item()


class TwoPredictions(Net):
    """A common slip: get_predictions leaves out the metadata."""

    def get_predictions(self, batch: Any, device: Any) -> Any:
        x, y = batch
        return self(x).argmax(1), y


def test_a_loss_that_is_a_number_is_refused_with_what_to_return() -> None:
    loop = _loop(ItemLoss())
    with pytest.raises(TypeError, match=r"get_loss.*received float.*not loss\.item\(\)"):
        loop.fit(num_epochs=1)


def test_predictions_without_metadata_are_refused_with_the_expected_form() -> None:
    loop = _loop(TwoPredictions())
    with pytest.raises(TypeError, match=r"three values.*received a tuple of 2"):
        loop.predict_on_validation_set()


# ----------------------------------------------------------------- tracked loops
def _val_package() -> Any:
    from scramjet.compat.aitoolbox.experiment.result_package.basic_packages import (
        ClassificationResultPackage,
    )

    return ClassificationResultPackage()


@pytest.mark.parametrize("mode", ["S3", "aws-s3", "gs"])
def test_a_misspelled_cloud_save_mode_is_refused_not_saved_locally(
    tmp_path: Any, mode: str
) -> None:
    from scramjet.compat.aitoolbox.torchtrain.callbacks.model_save import ModelCheckpoint
    from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoopCheckpointEndSave

    model = Net()
    train = DataLoader(_data(40, 0), batch_size=16)
    val = DataLoader(_data(20, 1), batch_size=8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match=rf"cloud_save_mode='{mode}' names no storage.*'local'"):
        TrainLoopCheckpointEndSave(
            model, train, val, None, opt, nn.CrossEntropyLoss(), "p", "e", str(tmp_path), {},
            val_result_package=_val_package(), cloud_save_mode=mode,
        )  # fmt: skip
    with pytest.raises(ValueError, match="names no storage"):
        ModelCheckpoint("p", "e", str(tmp_path), {}, cloud_save_mode=mode)
    assert not any(tmp_path.iterdir())  # nothing was written


def test_a_wrongly_cased_cloud_save_mode_gets_a_suggestion(tmp_path: Any) -> None:
    from scramjet.compat.aitoolbox.torchtrain.callbacks.model_save import ModelTrainEndSave

    with pytest.raises(ValueError, match=r"Did you mean 's3'\?"):
        ModelTrainEndSave("p", "e", str(tmp_path), {}, _val_package(), cloud_save_mode="S3")


def test_local_cloud_save_modes_still_save_locally(tmp_path: Any) -> None:
    from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoopCheckpoint

    for mode in (None, "local"):
        model = Net()
        loop = TrainLoopCheckpoint(
            model, DataLoader(_data(40, 0), batch_size=16), None, None,
            torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(),
            "p", f"e{mode}", str(tmp_path), {}, cloud_save_mode=mode,
        )  # fmt: skip
        loop.fit(num_epochs=1)
        (folder,) = (tmp_path / "p").glob(f"e{mode}_*")
        assert len(list((folder / "checkpoint_model").glob("*_E0.pth"))) == 1


def test_hyperparams_none_means_no_hyperparameters(tmp_path: Any) -> None:
    from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoopCheckpointEndSave

    model = Net()
    loop = TrainLoopCheckpointEndSave(
        model, DataLoader(_data(40, 0), batch_size=16), DataLoader(_data(20, 1), batch_size=8),
        None, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(),
        "p", "e", str(tmp_path), None, val_result_package=_val_package(), cloud_save_mode=None,
    )  # fmt: skip
    loop.fit(num_epochs=1)
    (folder,) = (tmp_path / "p").glob("e_*")
    lines = (folder / "hyperparams_list.txt").read_text().splitlines()
    assert [line.split(":")[0] for line in lines] == ["experiment_file_path", "source_dirs_paths"]
    with pytest.raises(TypeError, match=r"hyperparams must be a dict.*received list"):
        TrainLoopCheckpointEndSave(
            model, DataLoader(_data(40, 0), batch_size=16), None, None,
            torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(),
            "p", "e", str(tmp_path), [("lr", 0.1)], test_result_package=None,
            val_result_package=None, cloud_save_mode=None,
        )  # fmt: skip


# ----------------------------------------------------------------- continuing a run
def _tracked_loop(root: Any, seed: int = 0) -> tuple[Net, Any]:
    from scramjet.compat.aitoolbox.tracked import TrainLoopCheckpoint

    torch.manual_seed(seed)
    model = Net()
    loop = TrainLoopCheckpoint(
        model, DataLoader(_data(40, 0), batch_size=16, shuffle=True),
        DataLoader(_data(20, 1), batch_size=8), None,
        torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), nn.CrossEntropyLoss(),
        "p", "run", str(root), {"lr": 0.1},
    )  # fmt: skip
    return model, loop


def test_resume_from_a_tracked_run_folder_continues_it_exactly(tmp_path: Any) -> None:
    from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import AbstractCallback

    class Crash(AbstractCallback):
        def __init__(self) -> None:
            super().__init__("crash")

        def on_epoch_end(self) -> None:
            if self.train_loop_obj.epoch == 1:  # after epoch 0 was checkpointed
                raise RuntimeError("simulated crash")

    whole, loop = _tracked_loop(tmp_path / "a")
    loop.fit(num_epochs=3)
    _, loop = _tracked_loop(tmp_path / "b")
    with pytest.raises(Exception, match="simulated crash"):
        loop.fit(num_epochs=3, callbacks=[Crash()])
    (run,) = (tmp_path / "b" / "p").iterdir()
    resumed, loop = _tracked_loop(tmp_path / "b")
    loop.fit(num_epochs=3, resume_from=str(run))  # the run folder, as `scramjet runs` lists it
    for name, value in whole.state_dict().items():
        assert torch.equal(value, resumed.state_dict()[name]), name
    assert len(loop.train_history["val_loss"]) == 3  # the first epoch's value is restored


def test_resume_from_an_aitoolbox_experiment_folder_says_how_to_continue(tmp_path: Any) -> None:
    from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoopCheckpoint

    model = Net()
    loop = TrainLoopCheckpoint(
        model, DataLoader(_data(40, 0), batch_size=16), None, None,
        torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(),
        "p", "exp", str(tmp_path), {}, cloud_save_mode=None,
    )  # fmt: skip
    loop.fit(num_epochs=1)
    (folder,) = (tmp_path / "p").iterdir()
    stamp = folder.name[len("exp_") :]
    for given in (folder, folder / "checkpoint_model"):
        again = TrainLoop(
            model, loop.train_loader, None, None, loop.optimizer, nn.CrossEntropyLoss()
        )
        with pytest.raises(ValueError, match=rf"holds .*ModelLoadContinueTraining\('{stamp}'"):
            again.fit(num_epochs=2, resume_from=str(given))


def test_continue_training_downloads_the_checkpoint_of_a_cloud_run(tmp_path: Any, s3: Any) -> None:
    """The AWS workflow: the first machine is gone, its checkpoints are in the bucket."""
    import shutil

    from scramjet.compat.aitoolbox.torchtrain.callbacks.model_load import (
        ModelLoadContinueTraining,
    )
    from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoopCheckpoint

    bucket = s3.new_bucket()

    def loop(root: Any) -> tuple[Net, TrainLoopCheckpoint]:
        torch.manual_seed(0)
        model = Net()
        return model, TrainLoopCheckpoint(
            model, DataLoader(_data(40, 0), batch_size=16, shuffle=True), None, None,
            torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), nn.CrossEntropyLoss(),
            "p", "e", str(root), {}, cloud_save_mode="s3", bucket_name=bucket,
            cloud_dir_prefix="runs",
        )  # fmt: skip

    whole, first = loop(tmp_path / "whole")
    first.fit(num_epochs=3)
    _, first = loop(tmp_path / "machine_a")
    first.fit(num_epochs=1)
    shutil.rmtree(tmp_path / "machine_a")
    continued, second = loop(tmp_path / "machine_b")
    second.fit(
        num_epochs=3,
        callbacks=[ModelLoadContinueTraining(first.experiment_timestamp, epoch_num=0)],
    )
    assert second.epoch == 2  # epochs 1 and 2 were trained after the download
    for name, value in whole.state_dict().items():
        assert torch.equal(value, continued.state_dict()[name]), name


def test_continue_training_reads_with_a_custom_local_loader_class(tmp_path: Any) -> None:
    from scramjet.compat.aitoolbox.experiment.local_load.local_model_load import (
        PyTorchLocalModelLoader,
    )
    from scramjet.compat.aitoolbox.torchtrain.callbacks.model_load import (
        ModelLoadContinueTraining,
    )
    from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoopCheckpoint

    read: list[str] = []

    class Recording(PyTorchLocalModelLoader):
        def load_model_from_path(self, path: str, map_location: Any = "cpu") -> Any:
            read.append(path)
            return super().load_model_from_path(path, map_location)

    def loop() -> TrainLoopCheckpoint:
        model = Net()
        return TrainLoopCheckpoint(
            model, DataLoader(_data(40, 0), batch_size=16), None, None,
            torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(),
            "p", "e", str(tmp_path), {}, cloud_save_mode=None,
        )  # fmt: skip

    first = loop()
    first.fit(num_epochs=1)
    load = ModelLoadContinueTraining(
        first.experiment_timestamp, epoch_num=0, custom_local_loader_class=Recording
    )
    second = loop()
    second.fit(num_epochs=2, callbacks=[load])
    assert [p.rsplit("/", 1)[-1] for p in read] == [f"model_e_{first.experiment_timestamp}_E0.pth"]
    assert second.epoch == 1  # only the second epoch was trained


def test_on_batch_end_runs_after_every_batch_when_accumulating() -> None:
    """AIToolbox's hook order: on_batch_end per batch, on_after_optimizer_step per update."""
    from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import AbstractCallback

    class Count(AbstractCallback):
        def __init__(self) -> None:
            super().__init__("count")
            self.batches = self.updates = 0

        def on_batch_end(self) -> None:
            self.batches += 1

        def on_after_optimizer_step(self) -> None:
            self.updates += 1

    count = Count()
    _loop(Net(), end_auto_eval=False).fit(num_epochs=2, grad_accumulation=2, callbacks=[count])
    assert (count.batches, count.updates) == (6, 4)  # 3 batches per epoch: windows of 2 and 1
