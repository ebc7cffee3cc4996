"""Cost of experiment tracking: Trainer alone vs Trainer + Experiment with S3 storage.

Model and data as the trainer overhead benchmark: MLP 784-128-64-10, random in-memory
data, batch 64, 1 thread, CPU. The tracked run uses the CSV and TensorBoard loggers
(``--loggers csv`` leaves TensorBoard out), a full training checkpoint every epoch and
``storage="s3://..."`` on a local S3-compatible server (moto, started as a separate process
on 127.0.0.1, as a real store would be out of process).

Printed, from the same run, side by side (plain and tracked runs alternate, the order
switching every repetition):

- median time per epoch (epoch start → end of every epoch-end callback, so the
  checkpoint hand-off and the upload hand-off are included) and the ratio, plus the
  median of the per-repetition ratios (each tracked repetition against the plain one
  run next to it, which cancels slow drifts of the machine's load);
- the slowest single step (step start → optimizer update done) with and without
  storage attached: a step that waited on the network would show here;
- the one-time end-of-run cost (final weights, plots, report, waiting for and verifying
  the uploads), reported separately.

CPU time of the loop thread (and of the whole process) per epoch is printed too: on a
shared machine it shows the work tracking adds even when other processes make wall
times noisy.

Usage: python benchmarks/tracking_overhead.py [--reps 4] [--epochs 3] [--steps 400]
[--sync-every-s 60] [--upload-process auto|on|off] [--account]

Uploads run in a separate process by default for ``s3://`` (``Experiment(upload_process=
None)``); ``--upload-process off`` runs them in threads of the training process, as
earlier versions did, for comparison.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer
from scramjet.callbacks import (
    LogMetricsCallback,
    MoveModulesToDeviceCallback,
    ProgressBarCallback,
    TerminateOnNaNCallback,
    TrainerCallback,
)

BATCH = 64


class EpochStart(TrainerCallback):
    """First callback: stamps epoch and step starts."""

    def __init__(self) -> None:
        self.epoch_t0 = 0.0
        self.step_t0 = 0.0
        self.cpu_t0 = 0.0
        self.proc_t0 = 0.0

    def on_train_epoch_start(self, trainer: Any, **kwargs: Any) -> None:
        self.epoch_t0 = time.perf_counter()
        self.cpu_t0 = time.thread_time()
        self.proc_t0 = time.process_time()

    def on_train_step_start(self, trainer: Any, **kwargs: Any) -> None:
        self.step_t0 = time.perf_counter()


class EpochEnd(TrainerCallback):
    """Last callback: closes epoch and step timings."""

    def __init__(self, start: EpochStart) -> None:
        self.start = start
        self.epochs: list[float] = []
        self.cpu: list[float] = []
        self.proc: list[float] = []
        self.steps: list[float] = []

    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        self.steps.append(time.perf_counter() - self.start.step_t0)

    def on_training_run_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        self.epochs.append(time.perf_counter() - self.start.epoch_t0)
        self.cpu.append(time.thread_time() - self.start.cpu_t0)
        self.proc.append(time.process_time() - self.start.proc_t0)


class Accounting:
    """Loop-thread time spent inside the Experiment's per-step and epoch-end events.

    Wraps the events on the instance (before the Trainer is built), so the Trainer calls
    the wrappers. CPU time of the calling thread is the measure: unlike wall time, it
    does not count the time other processes held the cores.
    """

    EVENTS = ("on_train_step_end", "on_optimizer_step_end", "on_training_run_epoch_end")

    def __init__(self) -> None:
        self.cpu = dict.fromkeys(self.EVENTS, 0.0)
        self.wall = dict.fromkeys(self.EVENTS, 0.0)

    def attach(self, experiment: Any) -> None:
        for name in self.EVENTS:
            setattr(experiment, name, self._wrap(name, getattr(experiment, name)))

    def _wrap(self, name: str, method: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                self.cpu[name] += time.thread_time() - cpu
                self.wall[name] += time.perf_counter() - wall

        return timed


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10)
    )


def make_data(steps: int) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    return TensorDataset(
        torch.randn(steps * BATCH, 784, generator=g),
        torch.randint(0, 10, (steps * BATCH,), generator=g),
    )


def run(data: TensorDataset, epochs: int, experiment: Any = None) -> dict[str, Any]:
    torch.manual_seed(1)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    sink = io.StringIO()
    start = EpochStart()
    end = EpochEnd(start)
    callbacks: list[TrainerCallback] = [
        start,
        MoveModulesToDeviceCallback(),
        TerminateOnNaNCallback(),
        ProgressBarCallback(file=sink),
        LogMetricsCallback(file=sink),
    ]
    if experiment is not None:
        callbacks.append(experiment)
    callbacks.append(end)
    # The end-of-run work of Experiment runs in on_training_run_end, after the last epoch.
    trainer = Trainer(model, nn.CrossEntropyLoss(), opt, callbacks=callbacks)
    t0 = time.perf_counter()
    trainer.train(data, epochs, per_device_batch_size=BATCH)
    total = time.perf_counter() - t0
    return {
        "epochs": end.epochs,
        "cpu": end.cpu,
        "proc": end.proc,
        "max_step": max(end.steps),
        "finish": total - sum(end.epochs),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_s3() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    exe = shutil.which("moto_server") or str(Path(sys.executable).with_name("moto_server"))
    proc = subprocess.Popen(
        [exe, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
    )
    import boto3

    client = boto3.client("s3")
    for _ in range(100):
        try:
            client.create_bucket(Bucket="bench")
            return proc, endpoint
        except Exception:
            time.sleep(0.1)
    proc.terminate()
    raise RuntimeError("the local S3 server did not start")


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=400, help="optimizer steps per epoch")
    parser.add_argument(
        "--account",
        action="store_true",
        help="also report the loop-thread time spent inside the Experiment's events "
        "(adds two clock reads per event call to the tracked runs)",
    )
    parser.add_argument(
        "--sync-every-s",
        type=float,
        default=60.0,
        help="Experiment(sync_every_s=...): 0 mirrors checkpoints every epoch",
    )
    parser.add_argument(
        "--loggers",
        default="csv,tensorboard",
        help="comma-separated Experiment(loggers=...) of the tracked runs",
    )
    parser.add_argument(
        "--upload-process",
        choices=("auto", "on", "off"),
        default="auto",
        help="Experiment(upload_process=None/True/False): where the uploads run",
    )
    args = parser.parse_args()
    upload_process = {"auto": None, "on": True, "off": False}[args.upload_process]
    torch.set_num_threads(1)
    from scramjet.tracking import Experiment

    data = make_data(args.steps)
    proc, endpoint = start_s3()
    root = Path(tempfile.mkdtemp(prefix="scramjet-bench-"))
    base: list[dict[str, Any]] = []
    tracked: list[dict[str, Any]] = []
    accounting = Accounting()
    try:
        run(data, 1)  # warm-up (imports, allocator)
        warm = Experiment(
            "bench", "warmup", root=root, storage="s3://bench/runs", upload_process=upload_process
        )
        run(data, 1, warm)
        for rep in range(args.reps):  # interleaved, the order alternating
            exp = Experiment(
                "bench",
                "mlp",
                root=root,
                storage="s3://bench/runs",
                checkpoint="epoch",
                loggers=tuple(args.loggers.split(",")),
                sync_every_s=args.sync_every_s,
                upload_process=upload_process,
            )
            if args.account:
                accounting.attach(exp)
            if rep % 2:
                tracked.append(run(data, args.epochs, exp))
                base.append(run(data, args.epochs))
            else:
                base.append(run(data, args.epochs))
                tracked.append(run(data, args.epochs, exp))
            assert exp.upload_report is not None and exp.upload_report.ok, "uploads verified"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)

    def med(rows: list[dict[str, Any]], key: str) -> float:
        if key in ("epochs", "cpu", "proc"):
            return statistics.median([e for r in rows for e in r[key]])
        return statistics.median([r[key] for r in rows])

    b_epoch, t_epoch = med(base, "epochs"), med(tracked, "epochs")
    print(
        f"machine: {cpu_name()}, {os.cpu_count()} cores, torch {torch.__version__}, 1 thread, "
        f"Python {platform.python_version()}"
    )
    print(
        f"workload: MLP 784-128-64-10, batch {BATCH}, {args.steps} steps/epoch, {args.epochs} epochs, "
        f"{args.reps} interleaved reps; storage: local S3 server ({endpoint}), "
        f"upload_process={upload_process}, loggers={args.loggers}, checkpoint every epoch"
    )
    print(f"{'':38}{'Trainer':>12}{'+ Experiment':>16}{'ratio':>9}")
    print(f"{'median time per epoch (s)':38}{b_epoch:12.3f}{t_epoch:16.3f}{t_epoch / b_epoch:9.3f}")
    b_cpu, t_cpu = med(base, "cpu"), med(tracked, "cpu")
    print(f"{'  loop thread CPU per epoch (s)':38}{b_cpu:12.3f}{t_cpu:16.3f}{t_cpu / b_cpu:9.3f}")
    b_proc, t_proc = med(base, "proc"), med(tracked, "proc")
    print(
        f"{'  process CPU per epoch, all threads (s)':38}{b_proc:12.3f}{t_proc:16.3f}{t_proc / b_proc:9.3f}"
    )
    b_step = statistics.median([r["max_step"] for r in base])
    t_step = statistics.median([r["max_step"] for r in tracked])
    print(
        f"{'slowest step, median over reps (ms)':38}{b_step * 1e3:12.2f}{t_step * 1e3:16.2f}"
        f"{t_step / b_step:9.3f}"
    )
    print(
        f"{'slowest step, worst rep (ms)':38}{max(r['max_step'] for r in base) * 1e3:12.2f}"
        f"{max(r['max_step'] for r in tracked) * 1e3:16.2f}"
    )
    print(
        f"{'end of run: report + verified upload (s)':38}{med(base, 'finish'):12.3f}"
        f"{med(tracked, 'finish'):16.3f}"
    )
    if args.account:
        n = sum(len(r["epochs"]) for r in tracked)
        print(f"loop-thread time inside Experiment events, per epoch ({n} epochs):")
        for name in Accounting.EVENTS:
            print(
                f"  {name:34}{accounting.cpu[name] / n * 1e3:8.2f} ms CPU"
                f"{accounting.wall[name] / n * 1e3:8.2f} ms wall"
            )
        cpu_all, wall_all = sum(accounting.cpu.values()) / n, sum(accounting.wall.values()) / n
        print(
            f"  {'total':34}{cpu_all * 1e3:8.2f} ms CPU{wall_all * 1e3:8.2f} ms wall = "
            f"{100 * cpu_all / b_cpu:.1f}% (CPU) of a plain epoch's loop-thread CPU"
        )
    # Each tracked rep against the plain rep run right next to it: slow drifts of the
    # machine's load cancel out in these ratios.
    paired = statistics.median(
        statistics.median(t["epochs"]) / statistics.median(b["epochs"])
        for b, t in zip(base, tracked)
    )
    paired_cpu = statistics.median(
        statistics.median(t["cpu"]) / statistics.median(b["cpu"]) for b, t in zip(base, tracked)
    )
    print(f"{'median of paired per-rep ratios':38}{'':28}{paired:9.3f}")
    print(f"{'  loop thread CPU':38}{'':28}{paired_cpu:9.3f}")
    print(
        f"overhead per epoch: {100 * (t_epoch / b_epoch - 1):+.1f}% wall, "
        f"{100 * (t_cpu / b_cpu - 1):+.1f}% loop-thread CPU; paired: "
        f"{100 * (paired - 1):+.1f}% wall, {100 * (paired_cpu - 1):+.1f}% loop-thread CPU "
        f"(target: at most +5%)"
    )
    with contextlib.suppress(OSError):
        one, five, _ = os.getloadavg()
        print(
            f"load average at the end: {one:.2f} (1 min), {five:.2f} (5 min) "
            f"on {os.cpu_count()} cores"
        )


if __name__ == "__main__":
    main()
