"""Per-step cost of the terminal Dashboard: Trainer with Dashboard vs Trainer without.

MLP 784-128-64-10 on random in-memory data, batch 64, 400 optimizer steps, one thread,
CPU. Runs are interleaved (without, with, without, with, ...) and the medians compared.
The Dashboard draws with rich.live on a forced terminal into /dev/null (``--mode
live``, the default: the full drawing path) or prints plain lines (``--mode plain``).

    python benchmarks/dashboard_overhead.py [--reps 7] [--steps 400] [--mode live|plain]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Any

import torch
from torch.utils.data import TensorDataset

from scramjet.dashboard import Dashboard
from scramjet.trainer import Trainer


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _model() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(784, 128),
        torch.nn.ReLU(),
        torch.nn.Linear(128, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 10),
    )


def run_once(data: TensorDataset, steps: int, dashboard: Dashboard | None) -> tuple[float, float]:
    """Wall-clock and process CPU seconds per optimizer step of one ``train()`` call.

    Process CPU time counts every thread of the process, the Dashboard's drawing thread
    included, and not other programs: on a shared machine it is the steadier measure
    of what the Dashboard adds.
    """
    torch.manual_seed(0)
    model = _model()
    callbacks = [dashboard] if dashboard is not None else []
    trainer = Trainer(
        model,
        torch.nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.01),
        callbacks=callbacks,
        seed=0,
    )
    start, cpu_start = time.perf_counter(), time.process_time()
    trainer.train(data, num_epochs=1, per_device_batch_size=64, max_num_train_steps=steps)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    if trainer.state.global_step != steps:
        raise RuntimeError(f"expected {steps} steps, ran {trainer.state.global_step}")
    return elapsed / steps, cpu / steps


def component_costs(make_board: Any, steps: int) -> tuple[float, float]:
    """(seconds of one per-step hook call, seconds of one full redraw) with ``steps`` points.

    These two numbers bound the Dashboard's cost on the loop: the hook runs once per
    step on the training thread; a redraw runs ``refresh_per_second`` times a second on
    the display thread and holds the GIL at most that long.
    """
    board = make_board()
    board._active = True  # as during a Trainer run on rank 0
    loss = torch.tensor(0.5, requires_grad=True) * 2
    output = {"loss": loss, "batch_size": 64}
    n = 20_000
    start = time.perf_counter()
    for _ in range(n):
        board.on_train_step_end(None, batch=None, batch_output=output)
    hook = (time.perf_counter() - start) / n
    board._pending.clear()
    try:  # closed in any case: a live view left running swallows the traceback
        for i in range(steps):
            board._pending.append(torch.tensor(1.0 / (i + 1)))
        board.gauge({"loss": 0.5}, 0, 0, steps, "train", samples=64)
        display = board._display
        assert display is not None, "gauge() starts the display"
        start = time.perf_counter()
        for _ in range(50):
            display.redraw()
        redraw = (time.perf_counter() - start) / 50
    finally:
        board.close()
    return hook, redraw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7, help="interleaved repetitions")
    parser.add_argument("--steps", type=int, default=400, help="optimizer steps per run")
    parser.add_argument("--mode", choices=("live", "plain"), default="live")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    n = args.steps * 64
    data = TensorDataset(torch.randn(n, 784), torch.randint(0, 10, (n,)))
    sink = open(os.devnull, "w")  # noqa: SIM115 - kept open for every run

    def board() -> Dashboard:
        if args.mode == "live":
            return Dashboard(file=sink, force_terminal=True, refresh_per_second=4)
        return Dashboard(file=sink, force_terminal=False, print_every=1.0)

    run_once(data, min(args.steps, 50), None)  # warm-up of both paths
    run_once(data, min(args.steps, 50), board())
    base: list[tuple[float, float]] = []
    dash: list[tuple[float, float]] = []
    for _ in range(args.reps):
        base.append(run_once(data, args.steps, None))
        dash.append(run_once(data, args.steps, board()))
    print(
        f"machine: {_cpu_model()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"1 thread, Python {platform.python_version()}, load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(
        f"MLP 784-128-64-10, batch 64, {args.steps} steps, {args.reps} interleaved reps, "
        f"dashboard mode: {args.mode}"
    )
    print(f"{'ms/step':24}{'without':>10}{'with':>10}{'ratio':>8}{'paired ratio':>14}")
    for label, k, pick in (
        ("wall clock (median)", 0, statistics.median),
        ("wall clock (min)", 0, min),
        ("process CPU (median)", 1, statistics.median),
        ("process CPU (min)", 1, min),
    ):
        b = pick(r[k] for r in base)
        d = pick(r[k] for r in dash)
        paired = statistics.median(y[k] / x[k] for x, y in zip(base, dash))
        print(f"{label:24}{b * 1e3:10.4f}{d * 1e3:10.4f}{d / b:8.4f}{paired:14.4f}")
    print("paired ratio: median over repetitions of (run with) / (run without just before it)")
    hook, redraw = component_costs(board, args.steps)
    rate = 4.0 if args.mode == "live" else 1.0
    step = statistics.median(r[1] for r in base)
    bound = hook / step + redraw * rate
    print(
        f"components: per-step hook {hook * 1e6:.2f} us, one redraw {redraw * 1e3:.3f} ms "
        f"x {rate:g}/s -> bound {bound * 100:.2f}% of a {step * 1e3:.3f} ms step"
    )
    print("target: ratio <= 1.02")
    sink.close()


if __name__ == "__main__":
    main()
