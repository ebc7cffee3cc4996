"""Does a run survive failures? Preemption that reaches the DataLoader workers too, a
signal during the last evaluation, a store that is down when the run is preempted, a
resume into a changed model.

Each resume is compared with an uninterrupted run of the same job (``resume_job.py``:
AdamW, warmup-cosine, accumulation 2, EMA, dropout, seed 7).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.tracking.s3_helpers import S3Server, s3_server  # noqa: F401  (fixture)
from torch import nn
from torch.utils.data import DataLoader

from scramjet.callbacks import SaveTrainingStateCallback, TrainerCallback
from scramjet.checkpoint import (
    CheckpointManager,
    CheckpointMismatchError,
    CorruptCheckpointError,
    read_checkpoint,
)
from scramjet.runtime.preemption import (
    PREEMPTED_EXIT_CODE,
    TrainingPreempted,
    shield_loader_worker,
    shielded_worker_init,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import resume_job as job

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:.*worker.*:UserWarning")


def weights(trainer: Any) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in trainer.unwrapped_model.state_dict().items()}


def assert_bitwise(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), f"{key} differs"


class SignalAt(TrainerCallback):
    """Sends ``signum`` to this process after optimizer step ``step`` (``during="eval"``:
    during the first evaluation batch after that step instead)."""

    def __init__(self, step: int, signum: int = signal.SIGTERM, during: str = "step") -> None:
        self.step, self.signum, self.during = step, signum, during

    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if self.during == "step" and trainer.state.global_step == self.step:
            os.kill(os.getpid(), self.signum)

    def on_eval_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if self.during == "eval" and trainer.state.global_step == self.step:
            self.during = "sent"
            os.kill(os.getpid(), self.signum)


# ------------------------------------------- preemption reaching the DataLoader workers

_GROUP_JOB = """
import sys, torch
sys.path.insert(0, {job_dir!r})
import resume_job as job
from scramjet.runtime.preemption import shield_loader_worker
torch.set_num_threads(1)
trainer, kwargs = job.build({ckpt!r}, extra=(job.StepReporter({step_file!r}, 0.2),))
if {shield!r}:
    kwargs["train_dataloader_kwargs"] = {{"num_workers": 2, "worker_init_fn": shield_loader_worker}}
trainer.train(**kwargs, resume_from="auto")
"""


def preempt_process_group(tmp_path: Path, *, shield: bool, at_step: int = 4) -> tuple[int, str]:
    """Train ``resume_job`` (2 loader workers) in a process of its own group, then send
    ``SIGTERM`` to the whole group, as torchrun, ``scramjet launch`` and Slurm do."""
    step_file = tmp_path / "step"
    script = _GROUP_JOB.format(
        job_dir=str(Path(job.__file__).parent),
        ckpt=str(tmp_path / "ckpt"),
        step_file=str(step_file),
        shield=shield,
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if step_file.exists() and int(step_file.read_text() or 0) >= at_step:
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        output, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
    return proc.returncode, output


def test_a_shielded_loader_worker_ignores_sigterm_from_others_and_ends_with_its_loader() -> None:
    loader = DataLoader(
        list(range(64)), batch_size=4, num_workers=2, worker_init_fn=shield_loader_worker
    )
    batches = iter(loader)
    next(batches), next(batches)  # one batch from each worker: both have run their init
    workers = list(batches._workers)  # type: ignore[attr-defined]
    for worker in workers:  # the signal comes from another process (kill), not the loader
        subprocess.run(["kill", "-TERM", str(worker.pid)], check=True)
    time.sleep(0.3)
    assert all(worker.is_alive() for worker in workers)
    # Before: torch's worker handler ended the worker, and the next batch raised
    # "DataLoader worker (pid ...) is killed by signal: Terminated".
    assert len(list(batches)) == 14
    del batches  # the loader ends its workers itself
    for worker in workers:
        worker.join(timeout=10)
    assert not any(worker.is_alive() for worker in workers)


def test_shielded_worker_init_runs_the_users_init_too(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    init = shielded_worker_init(_mark_worker)
    loader = DataLoader([str(marks)] * 4, batch_size=2, num_workers=2, worker_init_fn=init)
    assert len(list(loader)) == 2
    assert sorted(p.name for p in marks.iterdir()) == ["0", "1"]


def _mark_worker(worker_id: int) -> None:
    info = torch.utils.data.get_worker_info()
    assert info is not None
    Path(info.dataset[0], str(worker_id)).touch()  # type: ignore[index]


@pytest.mark.slow  # a training process with 2 loader workers, then the resume: about 8 s
def test_a_group_sigterm_with_shielded_workers_saves_exits_143_and_resumes_bitwise(
    tmp_path: Path,
) -> None:
    code, output = preempt_process_group(tmp_path, shield=True)
    assert code == PREEMPTED_EXIT_CODE, output[-3000:]
    trainer, kwargs = job.build(tmp_path / "ckpt")
    kwargs["train_dataloader_kwargs"] = {"num_workers": 2, "worker_init_fn": shield_loader_worker}
    trainer.train(**kwargs, resume_from="auto")
    reference, kwargs = job.build(None)
    reference.train(**kwargs)
    assert_bitwise(weights(trainer), weights(reference))
    assert trainer.run_history.state_dict() == reference.run_history.state_dict()


@pytest.mark.slow  # a training process with 2 loader workers: about 5 s
def test_a_group_sigterm_with_the_trainers_own_loader_workers_saves_and_exits_143(
    tmp_path: Path,
) -> None:
    code, output = preempt_process_group(tmp_path, shield=False)
    assert code == PREEMPTED_EXIT_CODE, output[-3000:]


# ------------------------------------------------ a signal after the last optimizer step


def test_sigterm_during_the_last_evaluation_lets_the_run_complete(tmp_path: Path) -> None:
    trainer, kwargs = job.build(
        tmp_path / "ckpt", num_workers=0, extra=(SignalAt(job.TOTAL_STEPS, during="eval"),)
    )
    trainer.train(**kwargs)  # before: TrainingPreempted at step 21, training being done
    assert trainer.state.global_step == job.TOTAL_STEPS


# ------------------------------------------------------------- a changed model or setup


def test_a_changed_model_on_resume_gives_advice_that_train_can_follow(tmp_path: Path) -> None:
    trainer, kwargs = job.build(tmp_path / "ckpt", num_workers=0)
    trainer.train(**{**kwargs, "num_epochs": 1})
    trainer, kwargs = job.build(None, num_workers=0)
    model = trainer.unwrapped_model
    model.net[3] = nn.Linear(32, 4)  # one more class than the saved run
    trainer.optimizer = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.01)
    with pytest.raises(CheckpointMismatchError) as caught:
        trainer.train(**kwargs, resume_from=tmp_path / "ckpt")
    message = str(caught.value)
    assert "net.3.weight: (3, 32) -> (4, 32)" in message  # what does not fit
    # Before: "pass strict=False", which neither train() nor load_checkpoint() takes.
    assert "pass strict=False" not in message
    assert "train() without resume_from" in message
    # The advice works as written: the weights that fit are loaded.
    newest = CheckpointManager(tmp_path / "ckpt").latest_path
    with pytest.warns(UserWarning, match="skipped keys"):
        result = CheckpointManager(tmp_path / "ckpt").load(
            {"model": model}, which=newest, strict=False
        )
    assert list(result.mismatched_keys["model"]) == [
        "net.3.weight: (3, 32) -> (4, 32)",
        "net.3.bias: (3,) -> (4,)",
    ]


def test_resuming_with_a_scheduler_a_run_saved_without_one_says_what_to_do(
    tmp_path: Path,
) -> None:
    trainer, kwargs = job.build(tmp_path / "ckpt", num_workers=0)
    del kwargs["create_scheduler_fn"]
    trainer.train(**{**kwargs, "num_epochs": 1})
    trainer, kwargs = job.build(None, num_workers=0)
    with pytest.raises(CheckpointMismatchError) as caught:
        trainer.train(**kwargs, resume_from=tmp_path / "ckpt")
    message = str(caught.value)
    assert "has no entry 'scheduler'" in message
    assert "strict=False" not in message
    assert "load_optimizer=False, load_training_state=False" in message
    trainer.load_checkpoint(tmp_path / "ckpt", load_optimizer=False, load_training_state=False)


# ------------------------------------------------------ a store that is down at preemption


class StopServerAt(TrainerCallback):
    def __init__(self, server: S3Server, step: int) -> None:
        self.server, self.step = server, step

    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.global_step == self.step:
            self.server.stop()


# Before: the preemption save waited for every pending upload's retries (about 100 s for
# 3 files), far past the 30 s torch's elastic agent and Slurm give after SIGTERM, so the
# process was killed (137) instead of exiting 143.
@pytest.mark.serial  # a wall-clock bound: run alone, not beside other tests
@pytest.mark.slow  # 10 s of uploads after the signal, then a rerun: about 20 s
def test_a_preempted_run_with_its_store_down_stops_within_the_grace_period(
    tmp_path: Path,
    s3_server: S3Server,  # noqa: F811  (the fixture)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    url = f"s3://{s3_server.new_bucket()}/run/ckpt"
    signalled: list[float] = []

    class Preempt(SignalAt):
        def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
            if trainer.state.global_step == self.step:
                signalled.append(time.monotonic())
            super().on_optimizer_step_end(trainer, **kwargs)

    trainer, kwargs = job.build(
        None, num_workers=0, extra=(StopServerAt(s3_server, 8), Preempt(10))
    )
    local = tmp_path / "l"
    trainer.add_callback(
        SaveTrainingStateCallback(url, every_n_steps=3, keep_last=2, local_dir=local)
    )
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(TrainingPreempted) as preempted:
                trainer.train(**kwargs)
        took = time.monotonic() - signalled[0]
        assert took < 25, f"{took:.1f} s from SIGTERM to TrainingPreempted"
    finally:
        s3_server.start()
    said = [str(w.message) for w in caught if "at preemption" in str(w.message)]
    assert len(said) == 1, said  # one warning, naming every checkpoint left behind
    newest = local / "ckpt-000005-step10.pt"
    assert "ckpt-000003-step7.pt, ckpt-000004-step9.pt, ckpt-000005-step10.pt" in said[0]
    assert "resumes from the newest of them and uploads them" in said[0]
    assert str(newest) in str(preempted.value)  # where the state is: not on the store
    assert read_checkpoint(newest)["step"] == 10  # complete and valid
    bucket = url.split("/")[2]
    # Whatever reached the store is whole (the uploads left running may finish now that
    # it is back: a PUT shows an object only once complete).
    for key, size in s3_server.list_keys(bucket).items():
        name = key.rsplit("/", 1)[1]
        if name.startswith("ckpt-") and (local / name).is_file():
            assert size == (local / name).stat().st_size, name
    # Requeued on this machine, with the store back: the run goes on from the local copy
    # of step 10 and uploads what the preempted run could not.
    started = StartedAt()
    trainer, kwargs = job.build(None, num_workers=0, extra=(started,))
    trainer.add_callback(
        SaveTrainingStateCallback(url, every_n_steps=3, keep_last=2, local_dir=local)
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train(**kwargs, resume_from="auto")
    assert started.step == 10
    adopted = [str(w.message) for w in caught if "uploaded with the next save" in str(w.message)]
    assert adopted and newest.name in adopted[0]
    # Everything was uploaded, then rotated alike on the store and here.
    final = sorted(k.rsplit("/", 1)[1] for k in s3_server.list_keys(bucket) if "ckpt-" in k)
    assert final == sorted(p.name for p in local.glob("ckpt-*.pt"))
    assert final[-1] > newest.name


class StartedAt(TrainerCallback):
    step = -1

    def on_training_run_start(self, trainer: Any, **kwargs: Any) -> None:
        self.step = trainer.state.global_step


# ------------------------------------------------------- changed optimizer settings


class SetLearningRate(TrainerCallback):
    """Sets every group's learning rate when training starts (after a restore)."""

    def __init__(self, lr: float) -> None:
        self.lr = lr
        self.seen: list[float] = []

    def on_training_run_start(self, trainer: Any, **kwargs: Any) -> None:
        for group in trainer.optimizer.param_groups:
            group["lr"] = self.lr

    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        self.seen.append(trainer.optimizer.param_groups[0]["lr"])


def test_resuming_with_changed_optimizer_settings_warns_naming_both_values(
    tmp_path: Path,
) -> None:
    trainer, kwargs = job.build(tmp_path / "ckpt", num_workers=0)
    del kwargs["create_scheduler_fn"]
    trainer.train(**{**kwargs, "num_epochs": 1})
    trainer, kwargs = job.build(None, num_workers=0)
    del kwargs["create_scheduler_fn"]
    for group in trainer.optimizer.param_groups:
        group["lr"], group["weight_decay"] = 0.001, 0.5
    # Before: the saved lr 0.05 and weight decay 0.01 replaced them without a word.
    with pytest.warns(UserWarning, match="optimizer settings replace") as caught:
        trainer.train(**kwargs, resume_from=tmp_path / "ckpt")
    message = next(str(w.message) for w in caught if "settings replace" in str(w.message))
    assert "lr: 0.001 -> 0.05" in message and "weight_decay: 0.5 -> 0.01" in message
    assert trainer.optimizer.param_groups[0]["lr"] == 0.05  # the resume is the saved run
    # What the warning advises works: a callback sets the new value after the restore.
    setter = SetLearningRate(0.001)
    trainer, kwargs = job.build(None, num_workers=0, extra=(setter,))
    del kwargs["create_scheduler_fn"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the same settings: nothing to say
        trainer.train(**kwargs, resume_from=tmp_path / "ckpt")
    assert set(setter.seen) == {0.001}


def test_resuming_with_the_same_settings_and_a_scheduler_says_nothing(tmp_path: Path) -> None:
    trainer, kwargs = job.build(tmp_path / "ckpt", num_workers=0)
    trainer.train(**{**kwargs, "num_epochs": 2})
    trainer, kwargs = job.build(None, num_workers=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the scheduled lr is not a change
        trainer.train(**{**kwargs, "num_epochs": 2}, resume_from=tmp_path / "ckpt")


# ------------------------------------------------------- every checkpoint damaged


def test_auto_resume_over_only_damaged_checkpoints_says_how_to_go_on(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    trainer, kwargs = job.build(folder, num_workers=0)
    trainer.train(**{**kwargs, "num_epochs": 1})
    files = sorted(folder.glob("ckpt-*.pt"))
    for path in files:  # a bad copy: one bit flipped in the middle of each file
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 1
        path.write_bytes(bytes(data))
    trainer, kwargs = job.build(folder, num_workers=0)
    with pytest.raises(CorruptCheckpointError) as caught, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback's warning for each file
        trainer.train(**kwargs, resume_from="auto")
    message = str(caught.value)
    assert all(path.name in message for path in files)  # what was tried and why it failed
    assert "checksum mismatch" in message
    # Before: the causes only, not what to do about them.
    assert f"move them out of {str(folder)!r} to start the run afresh" in message
    assert "good copy" in message


def test_a_resume_says_which_file_and_where_in_the_run_it_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # train(resume_from=<folder>) printed nothing: the user could not tell which of the
    # folder's checkpoints was taken, nor where the run went on.
    class StopAt3(TrainerCallback):
        def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
            if trainer.state.global_step == 3:
                trainer.stop_training()

    trainer, kwargs = job.build(
        tmp_path / "ckpt", num_workers=0, every_n_epochs=None, extra=(StopAt3(),)
    )
    trainer.train(**kwargs)
    newest = CheckpointManager(tmp_path / "ckpt").latest_path
    assert newest is not None
    capsys.readouterr()
    trainer, kwargs = job.build(None, num_workers=0)
    trainer.train(**kwargs, resume_from=tmp_path / "ckpt")
    said = capsys.readouterr().out
    assert f"Resumed from {newest}: 6 batches into epoch 1, after 3 optimizer steps." in said
