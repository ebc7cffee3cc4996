from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest
import torch
from tracking_helpers import make_trainer, screenshot, tiny_data

from scramjet.checkpoint import CheckpointManager
from scramjet.tracking import Experiment, read_metrics
from scramjet.tracking._files import create_run_dir


def _train(exp: Experiment, epochs: int = 3, **train_kwargs) -> object:
    trainer = make_trainer([exp])
    data = tiny_data()
    trainer.train(
        data, epochs, eval_dataset=tiny_data(40, seed=1), per_device_batch_size=16, **train_kwargs
    )
    return trainer


def test_run_folder_layout_and_contents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "missing" / "runs"  # the root is created
    script = tmp_path / "train_mlp.py"
    script.write_text("print('training')\n")
    monkeypatch.setattr(sys.modules["__main__"], "__file__", str(script), raising=False)
    exp = Experiment(
        "proj", "mlp", root=root, hyperparams={"lr": 0.2, "layers": [16]}, log_every_n_steps=4
    )
    trainer = _train(exp)
    run = exp.run_dir
    assert run.parent == root / "proj"
    assert re.fullmatch(r"mlp_\d{8}-\d{6}_[0-9a-f]{6}", run.name)
    for rel in (
        "hyperparams.json",
        "environment.json",
        "metrics.csv",
        "metrics.jsonl",
        "report.html",
        "run.json",
        "model/model.pt",
        "model/model.safetensors",
        "plots/loss.png",
        "plots/train_loss_step.png",
    ):
        assert (run / rel).is_file(), rel
    assert (run / "code" / "train_mlp.py").read_text() == script.read_text(), "the script's copy"
    hyper = json.loads((run / "hyperparams.json").read_text())
    assert hyper["hyperparams"] == {"lr": 0.2, "layers": [16]}
    assert hyper["trainer"]["num_epochs"] == 3 and hyper["optimizer"]["class"] == "SGD"
    env = json.loads((run / "environment.json").read_text())
    assert env["seed"] == 0 and env["packages"]["torch"] == torch.__version__
    assert env["device"] == "cpu" and env["command_line"]
    rows = read_metrics(run)
    steps = [r["step"] for r in rows if r["scope"] == "step"]
    assert steps == list(range(1, 19))  # 96 / 16 = 6 updates x 3 epochs, each logged once
    epoch_rows = [r for r in rows if r["scope"] == "epoch"]
    assert [r["epoch"] for r in epoch_rows] == [1, 2, 3]
    history = trainer.run_history.get_metric_values("eval_loss_epoch")
    assert [r["metrics"]["eval_loss_epoch"] for r in epoch_rows] == pytest.approx(history)
    csv_lines = (run / "metrics.csv").read_text().splitlines()
    assert csv_lines[0] == "scope,epoch,step,time,name,value"
    assert len(csv_lines) == 1 + 18 * 2 + 3 * 2  # train_loss + lr per step, 2 losses per epoch
    # checkpoints are full training states that train(resume_from=...) accepts
    manager = CheckpointManager(run / "checkpoints", keep_last=None)
    assert 1 <= len(manager.checkpoints()) <= 3
    state = torch.load(run / "model" / "model.pt", weights_only=True)
    assert torch.equal(state["0.weight"], trainer.unwrapped_model[0].weight.detach())
    assert json.loads((run / "run.json").read_text())["status"] == "finished"


def test_runs_started_in_the_same_second_get_distinct_folders(tmp_path: Path) -> None:
    made = [create_run_dir(tmp_path, "p", "e") for _ in range(20)]
    stamps = [p.name.split("_")[1] for p in made]
    assert len(set(made)) == 20
    assert max(stamps.count(s) for s in stamps) >= 2, (
        "several folders were created within one second"
    )
    exps = [Experiment("p", "same", root=tmp_path) for _ in range(3)]
    dirs = {e.start() for e in exps}
    assert len(dirs) == 3


def _check_continuous(run: Path, total_steps: int, epochs: int) -> None:
    rows = read_metrics(run)
    steps = [r["step"] for r in rows if r["scope"] == "step"]
    assert steps == list(range(1, total_steps + 1)), "no duplicated or missing step rows"
    assert [r["epoch"] for r in rows if r["scope"] == "epoch"] == list(range(1, epochs + 1))


def test_resume_from_checkpoints_continues_the_same_folder(tmp_path: Path) -> None:
    exp = Experiment("p", "e", root=tmp_path, log_every_n_steps=1)
    _train(exp, epochs=2)
    run = exp.run_dir
    # A second process resumes: new Experiment object, same folder via the checkpoint.
    exp2 = Experiment("p", "e", root=tmp_path, log_every_n_steps=1)
    trainer = _train(exp2, epochs=4, resume_from=run / "checkpoints")
    assert exp2.run_dir == run
    assert len(list((tmp_path / "p").iterdir())) == 1, "no new run folder"
    assert trainer.state.global_step == 24
    _check_continuous(run, 24, 4)
    assert len(json.loads((run / "environment.json").read_text())["resumes"]) == 1


def test_resume_argument_restores_latest_and_drops_rows_after_the_checkpoint(
    tmp_path: Path,
) -> None:
    exp = Experiment("p", "e", root=tmp_path, log_every_n_steps=1, checkpoint=4, keep_last=2)
    _train(exp, epochs=1, max_num_train_steps=5)  # checkpoints at step 4 and the end (5)
    run = exp.run_dir
    # simulate a crash after step 4: rows logged after the checkpoint must go away
    manager = CheckpointManager(run / "checkpoints", keep_last=None)
    manager.checkpoints()[-1].path.unlink()
    (run / "checkpoints" / "index.json").unlink()
    exp2 = Experiment("p", "e", root=tmp_path, resume="latest", log_every_n_steps=1, checkpoint=4)
    trainer = _train(exp2, epochs=2)
    assert exp2.run_dir == run and trainer.state.global_step == 12
    _check_continuous(run, 12, 2)


def test_report_html_renders_its_plots_in_chromium(tmp_path: Path) -> None:
    exp = Experiment("p", "e", root=tmp_path, log_every_n_steps=2)
    _train(exp, epochs=3)
    exp.log_results("val", {"accuracy": 0.5, "confusion_matrix": [[1, 0], [0, 1]]})
    html = (exp.run_dir / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 3 and 'src="http' not in html
    assert "Results: val" in html and "eval_loss_epoch" in html and "Environment" in html
    pixels = screenshot(exp.run_dir / "report.html", tmp_path / "shot.png", tmp_path)
    assert pixels.shape[:2] == (2000, 1200)
    non_white = (pixels < 240).any(axis=2).mean()
    colours = len({tuple(c) for c in pixels[::4, ::4].reshape(-1, 3).tolist()})
    # plot lines are blue/orange: strongly coloured pixels exist only if images rendered
    r, g, b = pixels[..., 0].astype(int), pixels[..., 1].astype(int), pixels[..., 2].astype(int)
    saturated = ((abs(r - g) > 60) | (abs(g - b) > 60)).sum()
    assert non_white > 0.03 and colours > 50 and saturated > 500, (non_white, colours, saturated)


def test_on_complete_runs_after_finish_without_storage(tmp_path: Path) -> None:
    seen = []
    exp = Experiment("p", "e", root=tmp_path, on_complete=seen.append, checkpoint=None)
    _train(exp, epochs=1)
    assert seen == [None]
    assert not (exp.run_dir / "checkpoints").exists()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"checkpoint": "sometimes"}, "checkpoint must be"),
        ({"mode": "up"}, "mode must be"),
        ({"log_every_n_steps": 0}, "log_every_n_steps"),
    ],
)
def test_bad_options_say_what_was_received(tmp_path: Path, kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Experiment("p", "e", root=tmp_path, **kwargs)


def test_bad_names_and_missing_resume_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="project must be"):
        Experiment("a/b", "e", root=tmp_path)
    exp = Experiment("p", "e", root=tmp_path, resume=tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="not a run folder"):
        exp.start()


def test_step_logging_does_not_sync_every_step(tmp_path: Path) -> None:
    exp = Experiment("p", "e", root=tmp_path, log_every_n_steps=1000)
    trainer = make_trainer([exp])
    calls = {"n": 0}
    original = Experiment._flush_steps

    def counting(self, tr):
        calls["n"] += 1
        return original(self, tr)

    Experiment._flush_steps = counting  # type: ignore[method-assign]
    try:
        start = time.perf_counter()
        trainer.train(tiny_data(), 2, per_device_batch_size=8)
        assert time.perf_counter() - start < 60
    finally:
        Experiment._flush_steps = original  # type: ignore[method-assign]
    assert calls["n"] <= 3  # per epoch end + run end, never per step
    assert len([r for r in read_metrics(exp.run_dir) if r["scope"] == "step"]) == 24


def test_a_crashed_run_is_marked_failed_and_keeps_its_metrics(tmp_path: Path) -> None:
    from scramjet.callbacks import TrainerCallback

    class Crash(TrainerCallback):
        def on_train_epoch_start(self, trainer, **kwargs) -> None:
            if trainer.state.epoch == 1:
                raise RuntimeError("boom")

    exp = Experiment("p", "e", root=tmp_path, log_every_n_steps=1)
    with pytest.raises(Exception, match="boom"):
        make_trainer([exp, Crash()]).train(tiny_data(), 3, per_device_batch_size=16)
    info = json.loads((exp.run_dir / "run.json").read_text())
    assert info["status"] == "failed"
    assert [r["step"] for r in read_metrics(exp.run_dir) if r["scope"] == "step"] == list(
        range(1, 7)
    )
