"""An AIToolbox project ported by changing its imports: combinations and second runs."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from scramjet.compat.aitoolbox.torchtrain.model import TTModel
from scramjet.compat.aitoolbox.torchtrain.multi_loss_optim import MultiLoss, MultiOptimizer
from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoop


def _data(n: int = 40, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 4, generator=g), torch.randint(0, 3, (n,), generator=g))


class TwoLosses(TTModel):
    """Two heads, each with its own loss and optimizer (a GAN-like setup)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 3), nn.Linear(4, 3)

    def forward(self, x: Any) -> Any:
        return self.a(x) + self.b(x)

    def get_loss(self, batch: Any, criterion: Any, device: Any) -> MultiLoss:
        x, y = batch
        return MultiLoss({"la": criterion(self.a(x), y), "lb": 2 * criterion(self.b(x), y)})

    def get_predictions(self, batch: Any, device: Any) -> Any:
        x, y = batch
        return self(x).argmax(1), y, {}


def _multi_loss_loop(**kwargs: Any) -> tuple[TrainLoop, TwoLosses]:
    torch.manual_seed(3)
    model = TwoLosses()
    optimizer = MultiOptimizer(
        [
            torch.optim.SGD(model.a.parameters(), lr=0.1),
            torch.optim.SGD(model.b.parameters(), lr=0.1),
        ]
    )
    train = DataLoader(_data(), batch_size=16)  # 16 + 16 + 8: a short last batch
    val = DataLoader(_data(20, 1), batch_size=8)
    loop = TrainLoop(model, train, val, val, optimizer, nn.CrossEntropyLoss(), **kwargs)
    return loop, model


def _per_loss(model: TwoLosses, data: TensorDataset) -> dict[str, float]:
    x, y = data.tensors
    with torch.no_grad():
        return {
            "la": nn.functional.cross_entropy(model.a(x), y).item(),
            "lb": 2 * nn.functional.cross_entropy(model.b(x), y).item(),
        }


def test_validation_loss_of_a_multi_loss_model_is_a_dict_per_loss() -> None:
    loop, model = _multi_loss_loop()
    loop.fit(num_epochs=1)
    expected = _per_loss(model, _data(20, 1))
    val = loop.evaluate_loss_on_validation_set(float_dict_format=True)
    assert isinstance(val, dict), f"expected one loss per name, got {val!r}"
    assert val == pytest.approx(expected, rel=1e-5)
    assert loop.evaluate_loss_on_validation_set(force_prediction=True, float_dict_format=True) == (
        pytest.approx(val, rel=1e-6)
    )


def test_multi_loss_history_has_one_entry_per_loss_as_in_aitoolbox() -> None:
    loop, model = _multi_loss_loop()
    seen: list[tuple[Any, int]] = []
    original = model.get_loss

    def recording_get_loss(batch: Any, criterion: Any, device: Any) -> MultiLoss:
        loss = original(batch, criterion, device)
        seen.append(({k: float(v.detach()) for k, v in loss.loss_dict.items()}, len(batch[1])))
        return loss

    model.get_loss = recording_get_loss  # type: ignore[method-assign]
    loop.fit(num_epochs=2)
    history = loop.train_history.get_train_history()
    train_batches = seen[:3]  # the first epoch's three training batches
    for name in ("la", "lb"):
        # AIToolbox keys: <loss type>_<loss name>, one float per epoch
        assert len(history[f"loss_{name}"]) == 2
        assert len(history[f"val_loss_{name}"]) == 2
        assert len(history[f"train_end_test_loss_{name}"]) == 1
        assert len(history[f"accumulated_loss_{name}"]) == 2
        mean = sum(v[name] * n for v, n in train_batches) / sum(n for _, n in train_batches)
        assert history[f"accumulated_loss_{name}"][0] == pytest.approx(mean, rel=1e-5)
    assert history["val_loss_la"][-1] == pytest.approx(_per_loss(model, _data(20, 1))["la"])


class Linear(TTModel):
    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(4, 3)

    def forward(self, x: Any) -> Any:
        return self.l(x)

    def get_loss(self, batch: Any, criterion: Any, device: Any) -> Any:
        x, y = batch
        return criterion(self(x), y)

    def get_predictions(self, batch: Any, device: Any) -> Any:
        x, y = batch
        return self(x).argmax(1), y, {}


def test_resume_from_an_aitoolbox_model_file_says_how_to_continue_from_it(tmp_path: Any) -> None:
    from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoopCheckpoint

    torch.manual_seed(0)
    model = Linear()
    loader = DataLoader(_data(), batch_size=16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loop = TrainLoopCheckpoint(
        model, loader, None, None, optimizer, nn.CrossEntropyLoss(),
        "proj", "exp", str(tmp_path), {}, cloud_save_mode=None,
    )  # fmt: skip
    loop.fit(num_epochs=1)
    saved = next((tmp_path / "proj").glob("*/checkpoint_model/*_E0.pth"))
    again = TrainLoop(model, loader, None, None, optimizer, nn.CrossEntropyLoss())
    with pytest.raises(ValueError) as caught:
        again.fit(num_epochs=2, resume_from=str(saved))
    message = str(caught.value)
    assert str(saved) in message  # what was received
    assert "ModelLoadContinueTraining" in message  # how to continue from it
    assert loop.experiment_timestamp in message and "epoch_num=0" in message


def test_early_stopping_waits_for_a_new_value_with_an_end_auto_eval_interval() -> None:
    from scramjet.compat.aitoolbox.torchtrain.callbacks.basic import EarlyStopping

    torch.manual_seed(0)
    model = Linear()
    loader = DataLoader(_data(), batch_size=16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    # the losses are computed in epochs 0, 2, 4 only; they keep going down
    loop = TrainLoop(model, loader, loader, None, optimizer, nn.CrossEntropyLoss(), end_auto_eval=2)
    loop.fit(num_epochs=5, callbacks=[EarlyStopping(monitor="val_loss", patience=0)])
    values = loop.train_history["val_loss"]
    assert values == sorted(values, reverse=True) and len(values) == 3
    assert not loop.early_stop  # an epoch without a new value is no epoch without improvement
    assert loop.epoch == 4


def test_source_dirs_are_zipped_into_the_experiment_folder(tmp_path: Any) -> None:
    import zipfile

    from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoopCheckpoint

    sources = tmp_path / "my_models"
    (sources / "nets").mkdir(parents=True)
    (sources / "nets" / "resnet.py").write_text("DEPTH = 3\n")
    torch.manual_seed(0)
    model = Linear()
    loader = DataLoader(_data(16), batch_size=16)
    hyperparams: dict[str, Any] = {"lr": 0.1}
    loop = TrainLoopCheckpoint(
        model, loader, None, None, torch.optim.SGD(model.parameters(), lr=0.1),
        nn.CrossEntropyLoss(), "proj", "exp", str(tmp_path / "results"), hyperparams,
        cloud_save_mode=None, source_dirs=(str(sources),),
    )  # fmt: skip
    assert hyperparams["source_dirs_paths"] == (str(sources),)  # kept as given, as in AIToolbox
    loop.fit(num_epochs=1)
    folder = tmp_path / "results" / "proj" / f"exp_{loop.experiment_timestamp}"
    with zipfile.ZipFile(folder / "source_code.zip") as archive:
        assert "my_models/nets/resnet.py" in archive.namelist()
        assert archive.read("my_models/nets/resnet.py") == b"DEPTH = 3\n"
    assert not (folder / "source_code").exists()  # only the archive stays


def test_fit_refuses_an_unknown_keyword_instead_of_ignoring_it() -> None:
    torch.manual_seed(0)
    model = Linear()
    loader = DataLoader(_data(16), batch_size=8)
    loop = TrainLoop(
        model,
        loader,
        None,
        None,
        torch.optim.SGD(model.parameters(), lr=0.1),
        nn.CrossEntropyLoss(),
    )
    before = model.l.weight.clone()
    with pytest.raises(TypeError) as caught:
        loop.fit(num_epochs=1, callback=[])  # a typo of callbacks
    assert "'callback'" in str(caught.value) and "callbacks" in str(caught.value)
    assert torch.equal(before, model.l.weight)  # nothing was trained


@pytest.mark.skipif(torch.cuda.device_count() > 1, reason="checks the one-device fallback")
def test_dp_mode_honours_resume_from(tmp_path: Any) -> None:
    from scramjet.compat.aitoolbox import ModelCheckpoint
    from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import AbstractCallback

    class Epochs(AbstractCallback):
        def __init__(self) -> None:
            super().__init__("epochs")
            self.seen: list[int] = []

        def on_epoch_begin(self) -> None:
            self.seen.append(self.train_loop_obj.epoch)

    def parts() -> tuple[Linear, DataLoader[Any], torch.optim.Optimizer]:
        torch.manual_seed(0)
        model = Linear()
        return model, DataLoader(_data(16), batch_size=8), torch.optim.SGD(model.parameters())

    model, loader, optimizer = parts()
    loop = TrainLoop(model, loader, None, None, optimizer, nn.CrossEntropyLoss())
    loop.fit(num_epochs=1, callbacks=[ModelCheckpoint("p", "r", tmp_path, {})])
    model, loader, optimizer = parts()
    again = TrainLoop(model, loader, None, None, optimizer, nn.CrossEntropyLoss(), gpu_mode="dp")
    epochs = Epochs()
    with pytest.warns(UserWarning, match="gpu_mode='dp'"):
        again.fit(
            num_epochs=3,
            callbacks=[ModelCheckpoint("p", "r", tmp_path, {}), epochs],
            resume_from=loop.experiment.run_dir / "checkpoints",
        )
    assert epochs.seen == [1, 2]  # the checkpoint's epoch 0 is not trained again


@pytest.mark.slow  # starts two processes
@pytest.mark.distributed
def test_ddp_mode_passes_resume_from_to_its_processes(tmp_path: Any) -> None:
    torch.manual_seed(0)
    model = Linear()
    loader = DataLoader(_data(16), batch_size=8)
    loop = TrainLoop(
        model, loader, None, None, torch.optim.SGD(model.parameters(), lr=0.1),
        nn.CrossEntropyLoss(), gpu_mode="ddp",
    )  # fmt: skip
    missing = tmp_path / "no-checkpoints-here"
    with pytest.raises(Exception, match="no-checkpoints-here"):
        loop.fit(num_epochs=1, num_gpus=2, resume_from=str(missing))


def test_rm_subopt_local_models_ranks_each_checkpoint_by_its_own_epochs_metric(
    tmp_path: Any,
) -> None:
    from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import AbstractCallback
    from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoopCheckpoint

    scores = [0.5, 0.9, 0.1, 0.7, 0.2]

    class Score(AbstractCallback):
        """Records an epoch metric, as ModelPerformanceEvaluation does (before the checkpoint)."""

        def __init__(self) -> None:
            super().__init__("score")

        def on_epoch_end(self) -> None:
            self.train_loop_obj.insert_metric_result_into_history(
                "val_score", scores[self.train_loop_obj.epoch]
            )

    torch.manual_seed(0)
    model = Linear()
    loader = DataLoader(_data(16), batch_size=8)
    loop = TrainLoopCheckpoint(
        model, loader, None, None, torch.optim.SGD(model.parameters(), lr=0.1),
        nn.CrossEntropyLoss(), "proj", "exp", str(tmp_path), {}, cloud_save_mode=None,
        rm_subopt_local_models="val_score", num_best_checkpoints_kept=2,
    )  # fmt: skip
    loop.fit(num_epochs=5, callbacks=[Score()])
    kept = sorted(p.name for p in tmp_path.glob("proj/*/checkpoint_model/*.pth"))
    stamp = loop.experiment_timestamp
    assert kept == [f"model_exp_{stamp}_E1.pth", f"model_exp_{stamp}_E3.pth"]  # 0.9 and 0.7
