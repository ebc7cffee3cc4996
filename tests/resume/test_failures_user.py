"""Runs that meet failures, as a user meets them: a changed optimizer or scheduler on
resume, a killed process whose metric rows must survive, other preemption signals.

Every resume here is checked against an uninterrupted run of the same job
(``resume_job.py``: AdamW, warmup-cosine, accumulation 2, EMA, dropout, seed 7).
"""

from __future__ import annotations

import csv
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.tracking.s3_helpers import S3Server, s3_server  # noqa: F401  (fixture)

from scramjet.callbacks import SaveTrainingStateCallback, TrainerCallback
from scramjet.checkpoint import CheckpointManager, CheckpointMismatchError
from scramjet.runtime.preemption import TrainingPreempted

sys.path.insert(0, str(Path(__file__).resolve().parent))
import resume_job as job

REPO = Path(__file__).resolve().parents[2]


def one_epoch_checkpoints(folder: Path) -> Path:
    """Train the job for one epoch (7 updates) with checkpoints in ``folder``."""
    trainer, kwargs = job.build(folder, num_workers=0)
    trainer.train(**{**kwargs, "num_epochs": 1})
    return folder


# --------------------------------------------------------------- a changed optimizer


def test_resuming_into_another_kind_of_optimizer_is_refused_naming_it(tmp_path: Path) -> None:
    folder = one_epoch_checkpoints(tmp_path / "ckpt")
    trainer, kwargs = job.build(tmp_path / "new", num_workers=0)
    model = trainer.unwrapped_model
    trainer.optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    # Before: AdamW's groups replaced SGD's silently, and the first step raised
    # KeyError: 'momentum' from inside torch.
    with pytest.raises(CheckpointMismatchError) as caught:
        trainer.train(**kwargs, resume_from=folder)
    message = str(caught.value)
    assert "'optimizer'" in message and "SGD" in message
    assert "momentum" in message  # what the checkpoint's groups lack
    assert (
        "load_optimizer=False, load_training_state=False" in message
    )  # how to start a new optimizer from the weights


def test_a_refused_optimizer_is_left_as_it_was(tmp_path: Path) -> None:
    folder = one_epoch_checkpoints(tmp_path / "ckpt")
    model = job.DropoutMLP()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with pytest.warns(UserWarning, match="optimizer"):
        result = CheckpointManager(folder).load({"model": model, "optimizer": sgd}, strict=False)
    assert result.missing_keys["optimizer"] == ["dampening", "momentum", "nesterov"]
    assert sgd.param_groups[0]["momentum"] == 0.9 and sgd.param_groups[0]["lr"] == 0.1
    assert "betas" not in sgd.param_groups[0]
    before = [p.detach().clone() for p in model.parameters()]
    model(torch.randn(4, 8)).sum().backward()
    sgd.step()  # still a working SGD
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_another_number_of_parameter_groups_names_both(tmp_path: Path) -> None:
    folder = one_epoch_checkpoints(tmp_path / "ckpt")
    model = job.DropoutMLP()
    params = list(model.parameters())
    adamw = torch.optim.AdamW([{"params": params[:2]}, {"params": params[2:], "lr": 0.01}])
    with pytest.raises(CheckpointMismatchError) as caught:
        CheckpointManager(folder).load({"model": model, "optimizer": adamw})
    message = str(caught.value)
    assert "1 parameter group" in message and "2 parameter groups" in message
    assert "[4]" in message and "[2, 2]" in message  # sizes saved, sizes now


def test_resuming_into_another_kind_of_scheduler_is_refused(tmp_path: Path) -> None:
    folder = one_epoch_checkpoints(tmp_path / "ckpt")
    trainer, kwargs = job.build(tmp_path / "new", num_workers=0)
    kwargs["create_scheduler_fn"] = partial(
        torch.optim.lr_scheduler.OneCycleLR, max_lr=0.1, total_steps=100
    )
    # Before: the cosine schedule's attributes were poured into OneCycleLR (its
    # total_steps became 7) and the next step raised "Tried to step 8 times".
    with pytest.raises(CheckpointMismatchError, match=r"'scheduler'.*OneCycleLR"):
        trainer.train(**kwargs, resume_from=folder)


# ------------------------------------------------- metric rows across a SIGKILL


_KILLED_RUN = """
import os, sys
sys.path.insert(0, {job_dir!r})
import torch
import resume_job as job
from scramjet.callbacks import TrainerCallback
from scramjet.tracking import Experiment

class DieAt(TrainerCallback):
    def on_optimizer_step_end(self, trainer, **kwargs):
        if trainer.state.global_step == 11:
            os._exit(137)  # as SIGKILL: no exception, no clean-up, no flush

torch.set_num_threads(1)
experiment = Experiment(
    "p", "e", root={root!r}, checkpoint=3, save_script=False, async_checkpoint=False
)
trainer, kwargs = job.build(None, num_workers=0, extra=(experiment, DieAt()))
trainer.train(**kwargs)
"""


def step_rows(run_dir: Path, name: str) -> list[int]:
    with open(run_dir / "metrics.csv", newline="") as file:
        rows = list(csv.DictReader(file))
    return sorted(int(r["step"]) for r in rows if r["scope"] == "step" and r["name"] == name)


@pytest.mark.slow  # a training process that is killed, then the resume: about 4 s
def test_a_killed_run_resumed_by_experiment_keeps_every_step_row_once(tmp_path: Path) -> None:
    from scramjet.tracking import Experiment

    script = _KILLED_RUN.format(job_dir=str(Path(job.__file__).parent), root=str(tmp_path))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    killed = subprocess.run([sys.executable, "-c", script], env=env, timeout=120)
    assert killed.returncode == 137

    experiment = Experiment("p", "e", root=tmp_path, resume="latest", checkpoint=3)
    trainer, kwargs = job.build(None, num_workers=0, extra=(experiment,))
    trainer.train(**kwargs)
    assert trainer.state.global_step == job.TOTAL_STEPS
    steps = step_rows(experiment.run_dir, "train_loss")
    # The checkpoint of step 9 was restored: rows 1..9 come from the killed run, 10..21
    # from the resumed one; before, rows 8 and 9 were lost.
    assert [s for s, n in Counter(steps).items() if n > 1] == []
    assert steps == list(range(1, job.TOTAL_STEPS + 1))


# ------------------------------------------------------- other preemption signals


class SignalAt(TrainerCallback):
    """Sends ``signum`` to this process after optimizer step ``step``."""

    def __init__(self, step: int, signum: int) -> None:
        self.step, self.signum = step, signum

    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.global_step == self.step:
            os.kill(os.getpid(), self.signum)


@pytest.fixture()
def usr1_ignored() -> Any:
    """SIGUSR1 recorded instead of ending the test process; the old handler put back after."""
    received: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: received.append(signum))
    yield received
    signal.signal(signal.SIGUSR1, previous)


def test_usr1_forwarded_as_sigterm_saves_and_stops(tmp_path: Path, usr1_ignored: Any) -> None:
    # What docs/resume.md shows for Slurm's --signal=USR1@120.
    signal.signal(signal.SIGUSR1, lambda signum, frame: os.kill(os.getpid(), signal.SIGTERM))
    trainer, kwargs = job.build(
        tmp_path / "ckpt", num_workers=0, extra=(SignalAt(5, signal.SIGUSR1),)
    )
    with pytest.raises(TrainingPreempted) as caught:
        trainer.train(**kwargs)
    assert caught.value.code == 143 and caught.value.step == 5
    assert CheckpointManager(tmp_path / "ckpt").checkpoints()[-1].step == 5


def test_save_on_preemption_takes_the_signals_to_handle(tmp_path: Path, usr1_ignored: Any) -> None:
    callback = SaveTrainingStateCallback(
        tmp_path / "ckpt", save_on_preemption=(signal.SIGTERM, signal.SIGUSR1)
    )
    trainer, kwargs = job.build(None, num_workers=0, extra=(callback, SignalAt(5, signal.SIGUSR1)))
    with pytest.raises(TrainingPreempted) as caught:
        trainer.train(**kwargs)
    assert caught.value.signal_name == "SIGUSR1" and caught.value.step == 5


_LAUNCHED_JOB = """
import os, sys, time
sys.path.insert(0, {job_dir!r})
import torch
import resume_job as job
from scramjet.runtime import distributed as dist

class Report(job.StepReporter):
    def on_optimizer_step_end(self, trainer, **kwargs):
        self.step_file = os.path.join({out!r}, f"step{{dist.get_rank()}}")
        super().on_optimizer_step_end(trainer, **kwargs)

torch.set_num_threads(1)
trainer, kwargs = job.build({ckpt!r}, num_workers=0, extra=(Report(None, 0.2),))
trainer.train(**kwargs, resume_from="auto")
torch.save(trainer.state.global_step, os.path.join({out!r}, f"end{{dist.get_rank()}}.pt"))
"""


def _read_step(path: Path) -> int:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return -1


@pytest.mark.slow  # two launches of 2 gloo processes: about 25 s
@pytest.mark.distributed
def test_usr1_to_scramjet_launch_saves_and_exits_143(tmp_path: Path) -> None:
    # Before: torch's agent died of SIGUSR1 (status -10) and left both workers training
    # without it, to the end of the run, with no checkpoint of the stop.
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    out.mkdir()
    script = tmp_path / "train.py"
    job_dir = str(Path(job.__file__).parent)
    script.write_text(_LAUNCHED_JOB.format(job_dir=job_dir, out=str(out), ckpt=str(ckpt)))
    cmd = [sys.executable, "-m", "scramjet.cli", "launch", "--nproc-per-node", "2", str(script)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    agent = subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        while min(_read_step(out / "step0"), _read_step(out / "step1")) < 3:
            assert agent.poll() is None, agent.communicate()[1][-4000:]
            time.sleep(0.02)
        agent.send_signal(signal.SIGUSR1)  # Slurm's advance notice, to the launcher
        _, err = agent.communicate(timeout=120)
    finally:
        if agent.poll() is None:
            agent.kill()
    assert agent.returncode == 143, err[-4000:]
    assert "stopped by SIGUSR1" in err
    stopped = _read_step(out / "step0")
    assert stopped == _read_step(out / "step1") < 12  # 2 processes: 4 updates an epoch
    assert CheckpointManager(ckpt).checkpoints()[-1].step == stopped
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr[-4000:]
    assert torch.load(out / "end0.pt") == torch.load(out / "end1.pt") == 12


# ------------------------------------------------------- checkpoints on a store


def s3_options(endpoint: str) -> dict[str, Any]:
    """Credentials and endpoint given to the callback only (none in the environment)."""
    return {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
        "config_kwargs": {"retries": {"max_attempts": 1}},
    }


@pytest.fixture()
def no_aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)


class CrashAt(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.global_step == self.step:
            raise RuntimeError("crashed on purpose")


def test_auto_resume_reads_the_store_with_the_callbacks_storage_options(
    tmp_path: Path,
    s3_server: S3Server,  # noqa: F811  (the fixture)
    no_aws_environment: None,
) -> None:
    url = f"s3://{s3_server.new_bucket()}/run/ckpt"

    def callback() -> SaveTrainingStateCallback:
        return SaveTrainingStateCallback(
            url,
            every_n_steps=3,
            keep_last=2,
            local_dir=tmp_path / "copies",
            storage_options=s3_options(s3_server.endpoint),
        )

    reference, kwargs = job.build(None, num_workers=0)
    reference.train(**kwargs)
    # Before: the first run already failed, NoCredentialsError, since "auto" listed the
    # store without the callback's credentials.
    trainer, kwargs = job.build(None, num_workers=0, extra=(callback(), CrashAt(11)))
    with pytest.raises(RuntimeError, match="crashed on purpose"):
        trainer.train(**kwargs, resume_from="auto")
    shutil.rmtree(tmp_path / "copies")  # another machine: only the store has them
    resumed, kwargs = job.build(None, num_workers=0, extra=(callback(),))
    resumed.train(**kwargs, resume_from="auto")
    for key, value in reference.unwrapped_model.state_dict().items():
        assert torch.equal(value, resumed.unwrapped_model.state_dict()[key]), key
    assert resumed.run_history.state_dict() == reference.run_history.state_dict()


def test_auto_resume_from_an_unreachable_store_says_what_failed_and_what_to_do(
    tmp_path: Path, no_aws_environment: None
) -> None:
    from tests.tracking.s3_helpers import free_port

    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    callback = SaveTrainingStateCallback(
        "s3://bucket/run/ckpt", local_dir=tmp_path / "copies", storage_options=s3_options(dead)
    )
    trainer, kwargs = job.build(None, num_workers=0, extra=(callback,))
    # Before: botocore's bare EndpointConnectionError, naming neither the resume nor a way out.
    with pytest.raises(RuntimeError) as caught:
        trainer.train(**kwargs, resume_from="auto")
    message = str(caught.value)
    assert "resume_from='auto'" in message and "s3://bucket/run/ckpt" in message
    assert "Could not connect" in message  # the cause
    assert "run the same command again" in message
    assert trainer.state.global_step == 0  # never started fresh


def test_a_preempted_run_is_marked_interrupted_not_failed(tmp_path: Path) -> None:
    import json

    from scramjet.tracking import Experiment

    experiment = Experiment("p", "e", root=tmp_path / "runs", checkpoint=None)
    saver = SaveTrainingStateCallback(tmp_path / "ckpt")
    extra = (experiment, saver, SignalAt(5, signal.SIGTERM))
    trainer, kwargs = job.build(None, num_workers=0, extra=extra)
    with pytest.raises(TrainingPreempted):
        trainer.train(**kwargs)
    info = json.loads((experiment.run_dir / "run.json").read_text())
    assert info["status"] == "interrupted" and info["last_step"] == 5, info


def _cosine_annealing(opt: torch.optim.Optimizer, updates: int) -> Any:
    return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=updates)


def _cosine_warmup(opt: torch.optim.Optimizer, updates: int) -> Any:
    from scramjet.schedulers import CosineWarmupScheduler

    return CosineWarmupScheduler(opt, total_steps=updates)


@pytest.mark.parametrize("epochs_again", [1, 3])
@pytest.mark.parametrize(
    ("make", "name", "effect"),
    [
        (_cosine_annealing, "CosineAnnealingLR", "turns back up"),
        # stays at min_lr_ratio (0): the resumed epochs train nothing, and the warning says so
        (_cosine_warmup, "CosineWarmupScheduler", "the extra updates train nothing"),
    ],
)
def test_resuming_with_another_length_warns_that_the_scheduler_keeps_the_old_one(
    tmp_path: Path, epochs_again: int, make: Any, name: str, effect: str
) -> None:
    import warnings

    from tests.common.world import TinyMLP, blobs, make_trainer

    def run(num_epochs: int, resume: bool) -> list[str]:
        def cosine(opt: torch.optim.Optimizer) -> Any:
            return make(opt, 4 * num_epochs)

        saver = SaveTrainingStateCallback(tmp_path / "ckpt", async_write=False)
        trainer = make_trainer(TinyMLP(), callbacks=[saver], seed=0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trainer.train(blobs(n=16), num_epochs=num_epochs, per_device_batch_size=4,
                          create_scheduler_fn=cosine,
                          resume_from=tmp_path / "ckpt" if resume else None)  # fmt: skip
        return [str(w.message) for w in caught if "keeps the length" in str(w.message)]

    assert run(1, resume=False) == []  # 4 updates planned and made
    told = run(epochs_again, resume=True)
    if epochs_again == 1:
        assert told == []
    else:
        assert len(told) == 1, told
        assert "planned for 4 optimizer updates (1 epochs of 4)" in told[0]
        assert f"planned for 12 (3 of 4): the restored {name}" in told[0]
        assert effect in told[0]


def test_a_run_config_stand_in_without_numbers_still_saves(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from tests.common.world import TinyMLP, make_trainer

    trainer = make_trainer(TinyMLP())
    # pytorch-accelerated's own tests set a mock run configuration before saving
    trainer.run_config = SimpleNamespace(  # type: ignore[assignment]
        num_epochs=object(), num_update_steps_per_epoch=3, max_num_train_steps=None
    )
    trainer.save_checkpoint(tmp_path / "ckpt.pt")
    assert (tmp_path / "ckpt.pt").is_file()
