from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from aitb_helpers import MyNeuralModel, dataset, loaders
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

from scramjet.compat.aitoolbox import (
    AbstractCallback,
    BinaryClassificationResultPackage,
    ClassificationResultPackage,
    EarlyStopping,
    GradientStatsPrint,
    GradNormClip,
    GradValueClip,
    ModelCheckpoint,
    ModelTrainEndSave,
    ModelTrainHistoryFileWriter,
    ModelTrainHistoryPlot,
    RegressionResultPackage,
    TensorBoardFullTracker,
    TrainLoop,
)


def _loop(**kwargs):
    torch.manual_seed(0)
    model = MyNeuralModel()
    train, val, test = loaders()
    return TrainLoop(
        model,
        train,
        val,
        test,
        torch.optim.SGD(model.parameters(), lr=0.1),
        nn.CrossEntropyLoss(),
        **kwargs,
    )


class Recorder(AbstractCallback):
    def __init__(self) -> None:
        super().__init__("Recorder")
        self.events: list[str] = []

    def on_train_begin(self) -> None:
        self.events.append("train_begin")

    def on_epoch_begin(self) -> None:
        self.events.append("epoch_begin")

    def on_batch_begin(self) -> None:
        self.events.append("batch_begin")

    def on_after_gradient_update(self, optimizer_idx: int = 0) -> None:
        grads = [p.grad for p in self.train_loop_obj.model.parameters()]
        assert all(g is not None for g in grads), "gradients exist before the step"
        self.events.append("grad")

    def on_after_optimizer_step(self) -> None:
        self.events.append("opt")

    def on_batch_end(self) -> None:
        self.events.append("batch_end")

    def on_epoch_end(self) -> None:
        self.events.append(f"epoch_end:{len(self.train_loop_obj.train_history['val_loss'])}")

    def on_train_end(self) -> None:
        self.events.append("train_end")


def test_hooks_fire_on_the_matching_trainer_events() -> None:
    rec = Recorder()
    _loop().fit(num_epochs=2, callbacks=[rec], grad_accumulation=2)
    ev = rec.events
    assert ev[0] == "train_begin" and ev[-1] == "train_end"
    assert ev.count("epoch_begin") == 2 and ev.count("batch_begin") == 12
    # 6 batches per epoch, accumulation 2 → 3 updates per epoch (grad, opt); batch_end per batch
    assert ev.count("grad") == ev.count("opt") == 6 and ev.count("batch_end") == 12
    first_update = ev.index("grad")
    assert ev[first_update : first_update + 3] == ["grad", "opt", "batch_end"]
    assert "epoch_end:1" in ev and "epoch_end:2" in ev  # after validation of that epoch


class MaxGrad(AbstractCallback):
    def __init__(self) -> None:
        super().__init__("MaxGrad", execution_order=10)  # runs after the clipping callbacks
        self.max_abs: list[float] = []
        self.norms: list[float] = []

    def on_after_gradient_update(self, optimizer_idx: int = 0) -> None:
        grads = [p.grad.detach() for p in self.train_loop_obj.model.parameters()]
        self.max_abs.append(max(float(g.abs().max()) for g in grads))
        self.norms.append(float(torch.norm(torch.stack([g.norm() for g in grads]))))


def test_gradient_value_and_norm_clipping() -> None:
    probe = MaxGrad()
    _loop().fit(num_epochs=1, callbacks=[probe, GradValueClip(0.01)])
    assert max(probe.max_abs) <= 0.01 + 1e-7
    probe, clip = MaxGrad(), GradNormClip(0.05)
    _loop().fit(num_epochs=1, callbacks=[probe, clip])
    assert max(probe.norms) <= 0.05 + 1e-5 and clip.last_total_norm is not None


def test_gradient_stats_print(capsys: pytest.CaptureFixture[str]) -> None:
    stats = GradientStatsPrint()
    _loop().fit(num_epochs=1, callbacks=[stats])
    assert set(stats.last_stats) == {"l1.weight", "l1.bias", "l2.weight", "l2.bias"}
    assert "grad l1.weight: mean" in capsys.readouterr().out


def test_early_stopping_sets_the_stop_flag() -> None:
    loop = _loop()
    stop = EarlyStopping(monitor="val_loss", min_delta=10.0, patience=0)  # nothing counts as better
    loop.fit(num_epochs=10, callbacks=[stop])
    assert len(loop.train_history["val_loss"]) == 2 and loop.epoch < 10


def test_history_plot_file_writer_and_tensorboard(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    plot = ModelTrainHistoryPlot(folder=tmp_path / "plots")
    writer = ModelTrainHistoryFileWriter(folder=tmp_path / "hist")
    tb = TensorBoardFullTracker(log_dir=tmp_path / "tb")
    _loop().fit(num_epochs=2, callbacks=[plot, writer, tb])
    assert (tmp_path / "plots" / "loss.png").stat().st_size > 1000
    lines = (tmp_path / "hist" / "train_history.jsonl").read_text().splitlines()
    assert [json.loads(x)["epoch"] for x in lines] == [1, 2]
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert [e.step for e in acc.Scalars("val_loss")] == [1, 2]


def test_model_checkpoint_and_end_save_callbacks_track_a_plain_loop(tmp_path: Path) -> None:
    loop = _loop()
    loop.fit(num_epochs=2, callbacks=[ModelCheckpoint("p", "ck", tmp_path, {"lr": 0.1})])
    run = loop.experiment.run_dir
    assert (run / "checkpoints" / "index.json").is_file() and (run / "model" / "model.pt").is_file()
    loop = _loop()
    loop.fit(
        num_epochs=1,
        callbacks=[
            ModelTrainEndSave(
                "p", "end", tmp_path, {"lr": 0.1}, val_result_package=ClassificationResultPackage()
            )
        ],
    )
    results = json.loads((loop.experiment.run_dir / "results" / "val.json").read_text())
    assert 0.0 <= results["accuracy"] <= 1.0 and len(results["confusion_matrix"]) == 3


def test_fit_resume_continues_the_run(tmp_path: Path) -> None:
    loop = _loop()
    loop.fit(num_epochs=1, callbacks=[ModelCheckpoint("p", "r", tmp_path, {})])
    run = loop.experiment.run_dir
    loop2 = _loop()
    loop2.fit(
        num_epochs=3,
        callbacks=[ModelCheckpoint("p", "r", tmp_path, {})],
        resume_from=run / "checkpoints",
    )
    assert loop2.experiment.run_dir == run and loop2.total_iteration_idx == 17
    assert len(loop2.train_history["loss"]) == 3


def test_unconvertible_loader_is_used_as_is() -> None:
    torch.manual_seed(0)
    model = MyNeuralModel()
    data = dataset(40, 3)
    loader = DataLoader(
        data, batch_sampler=BatchSampler(SequentialSampler(data), 8, drop_last=False)
    )
    loop = TrainLoop(
        model,
        loader,
        None,
        None,
        torch.optim.SGD(model.parameters(), lr=0.1),
        nn.CrossEntropyLoss(),
    )
    loop.fit(num_epochs=1)
    assert loop.total_iteration_idx == 4  # 5 batches, counted from -1


def test_num_iterations_and_plain_module() -> None:
    torch.manual_seed(0)
    model = nn.Linear(6, 3)  # no get_loss: criterion(model(x), y)
    train, val, test = loaders()
    loop = TrainLoop(
        model, train, val, test, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss()
    )
    assert loop.fit(num_iterations=8) is model
    assert loop.total_iteration_idx == 7  # 8 batches, counted from -1
    y_pred, y_true, _ = loop.predict_on_test_set()
    assert y_pred.shape == (21, 3) and y_true.shape == (21,)


def test_result_packages_take_targets_first_and_combine() -> None:
    from scramjet.compat.aitoolbox.experiment.result_package.abstract_result_packages import (
        MultipleResultPackageWrapper,
    )

    y_true, y_pred = torch.tensor([1, 0, 1, 1]), torch.tensor([0.9, 0.4, 0.2, 0.8])
    both = MultipleResultPackageWrapper()
    both.prepare_result_package([BinaryClassificationResultPackage(), RegressionResultPackage()])
    res = both.prepare_result_package(y_true, y_pred)  # as a TrainLoop calls it
    assert res["BinaryClassificationResult"]["accuracy"] == pytest.approx(0.75)
    mse = float(((y_pred - y_true) ** 2).mean())
    assert res["RegressionResult"]["mse"] == pytest.approx(mse)
    with pytest.raises(ValueError, match="prepare_result_package"):
        BinaryClassificationResultPackage() + RegressionResultPackage()  # nothing computed yet
    with pytest.raises(ValueError, match="prepare_result_package"):
        ClassificationResultPackage(strict_content_check=True).get_results()
    with pytest.warns(UserWarning, match="no results yet"):
        assert ClassificationResultPackage().get_results() is None


def test_classification_results_keep_aitoolbox_accuracy_key() -> None:
    """Code written against AIToolbox reads ``results["Accuracy"]``; scramjet's full
    classification metrics come beside it, with the same accuracy."""
    package = ClassificationResultPackage()
    package.prepare_result_package([0, 1, 2, 2, 1], [0, 2, 2, 2, 1])
    results = package.get_results()
    assert results["Accuracy"] == pytest.approx(0.8) == results["accuracy"]
    assert next(iter(results)) == "Accuracy" and "f1_macro" in results
