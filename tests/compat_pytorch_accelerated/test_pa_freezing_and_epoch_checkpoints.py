"""A pytorch-accelerated fine-tuning and checkpointing code base, imports changed: freezing
and unfreezing layers between and inside runs, checkpoints saved from epoch-end events."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.common.torchrun import run_torchrun
from torch import nn
from torch.utils.data import TensorDataset

from scramjet.compat.pytorch_accelerated.callbacks import (
    SaveTrainingStateCallback,
    StopTrainingError,
    TrainerCallback,
)
from scramjet.compat.pytorch_accelerated.finetuning import ModelFreezer
from scramjet.compat.pytorch_accelerated.trainer import Trainer


def _data(n: int = 48) -> TensorDataset:
    x = torch.randn(n, 4, generator=torch.Generator().manual_seed(3))
    return TensorDataset(x, (x[:, 0] > 0).long())


def _model(dropout: float = 0.0) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(4, 8), nn.Sequential(nn.ReLU(), nn.Dropout(dropout)), nn.Linear(8, 2)
    )


class _Wrapper(nn.Module):
    """Stands in for DistributedDataParallel: a wrapper built over the trainable layers."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.module(x)
        return out


class _WrappingTrainer(Trainer):
    """Unfreezes every layer at the start of epoch 2, as fine-tuning code does."""

    wraps = 0

    def wrap_model(self, model: nn.Module) -> nn.Module:
        super().wrap_model(model)
        type(self).wraps += 1
        return _Wrapper(model)

    def train_epoch_start(self) -> None:
        super().train_epoch_start()
        if self.run_history.current_epoch == 2:
            ModelFreezer(self.model).unfreeze()


def test_unfreezing_in_train_epoch_start_rebuilds_the_distributed_wrapper() -> None:
    _WrappingTrainer.wraps = 0
    model = _model()
    ModelFreezer(model).freeze()
    trainer = _WrappingTrainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=()
    )
    trainer.train(_data(), num_epochs=3, per_device_batch_size=16)
    # built at train(), rebuilt once after the unfreezing, not again in epoch 3
    assert _WrappingTrainer.wraps == 2
    assert isinstance(trainer.model, _Wrapper) and trainer.model.module is model


def test_the_freezer_groups_a_wrapped_model_by_the_models_own_layers() -> None:
    model = _model()
    compiled = torch.compile(model)  # not run: only its wrapper is used
    freezer = ModelFreezer(compiled)
    groups = freezer.get_layer_groups()
    # as pytorch-accelerated: (index from the start, index from the end)
    assert [g.layer_group_idx for g in groups] == [(0, -3), (1, -2), (2, -1)]
    assert [g.name for g in groups] == ["0", "1", "2"]
    idx = [(0, -3), (1, -2), (1, -2), (2, -1)]  # Linear | ReLU, Dropout | Linear
    assert [layer.layer_group_idx for layer in freezer.get_layers()] == idx
    freezer.freeze(from_index=0, to_index=-2)
    assert [p.requires_grad for p in model.parameters()] == [False, False, True, True]


_FINETUNE_JOB = """
    import json, sys
    import torch
    from torch import nn
    from torch.utils.data import TensorDataset
    from scramjet import Trainer as CoreTrainer
    from scramjet.compat.pytorch_accelerated.trainer import Trainer
    from scramjet.compat.pytorch_accelerated.finetuning import ModelFreezer
    from scramjet.runtime.distributed import gather

    torch.manual_seed(0)
    x = torch.randn(64, 4)
    data = TensorDataset(x, (x[:, 0] > 0).long())
    base = Trainer if sys.argv[1] == "compat" else CoreTrainer

    def build():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 2))
        return model, torch.optim.SGD(model.parameters(), lr=0.1)

    def same_on_every_rank(trainer, model):
        rows = gather(torch.cat([p.detach().reshape(-1) for p in model.parameters()])[None])
        return bool(torch.equal(rows[0], rows[1]))

    out = {}
    # two stages: the head alone, then everything (the usual fine-tuning recipe)
    model, opt = build()
    freezer = ModelFreezer(model)
    freezer.freeze()
    trainer = base(model, nn.CrossEntropyLoss(), opt, callbacks=())
    trainer.train(data, num_epochs=1, per_device_batch_size=8)
    freezer.unfreeze()
    trainer.train(data, num_epochs=1, per_device_batch_size=8)
    out["two_stages"] = same_on_every_rank(trainer, model)
    if sys.argv[1] == "compat":
        # frozen in training_run_start (after the wrapper is built), unfrozen in epoch 2
        class Finetune(Trainer):
            def training_run_start(self):
                self.freezer = ModelFreezer(self.model)
                self.freezer.freeze(0, -2)

            def train_epoch_start(self):
                super().train_epoch_start()
                if self.run_history.current_epoch == 2:
                    self.freezer.unfreeze()

        model, opt = build()
        trainer = Finetune(model, nn.CrossEntropyLoss(), opt, callbacks=())
        trainer.train(data, num_epochs=2, per_device_batch_size=8)
        out["inside_run"] = same_on_every_rank(trainer, model)
    if trainer.is_main_process:
        print("RESULT " + json.dumps(out))
"""


def _finetune_job(tmp_path: Path, which: str) -> dict[str, bool]:
    script = tmp_path / "finetune_job.py"
    script.write_text(textwrap.dedent(_FINETUNE_JOB))
    proc = run_torchrun(script, which)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    result: dict[str, bool] = json.loads(line[len("RESULT ") :])
    return result


@pytest.mark.slow
def test_layers_unfrozen_between_or_inside_runs_stay_in_step_across_processes(
    tmp_path: Path,
) -> None:
    # Before: the DDP wrapper built while layers were frozen was kept, so the unfrozen
    # layers' gradients were never reduced (the ranks' weights drifted apart), and
    # freezing after the wrapper was built crashed with DDP's unused-parameter error.
    assert _finetune_job(tmp_path, "compat") == {"two_stages": True, "inside_run": True}


@pytest.mark.slow
def test_core_trainer_layers_unfrozen_between_runs_stay_in_step(tmp_path: Path) -> None:
    assert _finetune_job(tmp_path, "core") == {"two_stages": True}


# ---------------------------------------------------------------- epoch-end checkpoints
def _save_at(event: str, path: Path) -> TrainerCallback:
    """A callback that saves a checkpoint in ``event`` of epoch 2, then stops the run."""

    def save(self: TrainerCallback, trainer: Any, **kwargs: Any) -> None:
        if trainer.run_history.current_epoch == 2:
            trainer.save_checkpoint(path)
            raise StopTrainingError("interrupted")

    return type("SaveAt", (TrainerCallback,), {event: save})()


def _run(callbacks: list[Any], resume: Path | None = None, core: bool = False) -> Any:
    from scramjet import Trainer as CoreTrainer

    model = _model(dropout=0.3)
    kind = CoreTrainer if core else Trainer
    trainer = kind(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=callbacks, seed=1,
    )  # fmt: skip
    trainer.train(
        _data(), num_epochs=3, eval_dataset=_data(16), per_device_batch_size=16,
        resume_from=resume,
    )  # fmt: skip
    return trainer


@pytest.mark.parametrize("event", ["on_train_epoch_end", "on_eval_epoch_end"])
def test_core_checkpoint_saved_at_an_epoch_end_event_resumes_as_the_uninterrupted_run(
    tmp_path: Path, event: str
) -> None:
    path = tmp_path / "mid.pt"
    whole = _run([], core=True)
    _run([_save_at(event, path)], core=True)
    resumed = _run([], resume=path, core=True)
    for name in ("train_loss_epoch", "eval_loss_epoch"):
        assert len(resumed.run_history.get_metric_values(name)) == 3
    assert all(
        torch.equal(a, b) for a, b in zip(whole.model.parameters(), resumed.model.parameters())
    )


def test_an_epoch_training_state_resumes_with_each_epoch_loss_once(tmp_path: Path) -> None:
    saver = SaveTrainingStateCallback(tmp_path / "states", save_every_n_epochs=1, save_at_end=False)
    whole = _run([saver])
    resumed = _run([], resume=tmp_path / "states" / "checkpoint_epoch_2")
    assert resumed.run_history.get_metric_values(
        "train_loss_epoch"
    ) == whole.run_history.get_metric_values("train_loss_epoch")


# ---------------------------------------------------------------- metric logging
class _Accuracy(TrainerCallback):
    """A metrics callback as peer code writes it: updated per batch, recorded per epoch."""

    def on_eval_epoch_start(self, trainer: Any, **kwargs: Any) -> None:
        self.correct = self.seen = 0

    def on_eval_step_end(self, trainer: Any, batch: Any, batch_output: Any, **kw: Any) -> None:
        self.correct += int((batch_output["model_outputs"].argmax(-1) == batch[1]).sum())
        self.seen += len(batch[1])

    def on_eval_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        trainer.run_history.update_metric("accuracy", self.correct / self.seen)


def test_a_standalone_evaluation_logs_the_metrics_its_callbacks_record() -> None:
    import io

    from scramjet.compat.pytorch_accelerated.callbacks import LogMetricsCallback

    out = io.StringIO()
    model = _model()
    trainer = Trainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[_Accuracy(), LogMetricsCallback(file=out)],
    )  # fmt: skip
    trainer.train(_data(), num_epochs=1, per_device_batch_size=16)
    trainer.evaluate(_data(16), per_device_batch_size=8)
    line = out.getvalue().splitlines()[-1]
    # the peer logs every metric at the end of an evaluation; before, only eval_* names
    assert "accuracy: " in line and "eval_loss_epoch: " in line
    assert "train_loss_epoch" not in line  # not recorded by this evaluation


# ---------------------------------------------------------------- checkpoint round trips
def test_loading_a_fine_tuned_optimizer_into_another_layout_names_both(tmp_path: Path) -> None:
    from scramjet.checkpoint import CheckpointMismatchError

    model = _model()
    freezer = ModelFreezer(model)
    freezer.freeze()
    opt = torch.optim.AdamW(freezer.get_trainable_parameters(), lr=0.01)
    trainer = Trainer(model, nn.CrossEntropyLoss(), opt, callbacks=())
    for group in freezer.unfreeze().values():  # stage 2 trains the thawed layers too
        opt.add_param_group(group)
    trainer.train(_data(), num_epochs=1, per_device_batch_size=16)
    trainer.save_checkpoint(tmp_path / "stage2.pt")

    fresh = _model()
    ModelFreezer(fresh).freeze()
    head_only = torch.optim.AdamW([p for p in fresh.parameters() if p.requires_grad], lr=0.01)
    other = Trainer(fresh, nn.CrossEntropyLoss(), head_only, callbacks=())
    # before: torch's "loaded state dict has a different number of parameter groups"
    with pytest.raises(CheckpointMismatchError, match=r"2 parameter groups of sizes \[2, 2\]"):
        other.load_checkpoint(tmp_path / "stage2.pt")
    other.load_checkpoint(tmp_path / "stage2.pt", load_optimizer=False)  # the fix it names
    assert torch.equal(fresh[0].weight, model[0].weight)
