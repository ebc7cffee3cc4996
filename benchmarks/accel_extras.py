"""Opt-in extras of ``scramjet.accel``, each against the same setup without it, in one run.

Every case builds two copies of one model from the same seed (same weights, same batches,
same optimizer settings) that differ only in the option, switched on the way a user does
it: ``accelerate_model(..., channels_last=True)``, ``accelerate_model(..., autocast="bf16")``,
``fast_optimizer(opt)``, ``with tf32(True)``, ``accelerate_model(..., backends=["COMPILE"],
cuda_graphs=True)``. Timed blocks of steps alternate between the two (baseline first in even
repetitions, option first in odd ones); the medians of ms/step and their ratio are printed,
with the range of the per-repetition ratios. Both copies take the same number of steps on
the same batches, so the run also shows what the option does to results: the largest output
difference on the first step (identical weights), the mean training loss over the last
cycle of batches, and the largest weight difference after all steps.

CPU cases: channels_last (small CNN), bf16 autocast (small CNN, transformer block), fused /
foreach optimizer (optimizer step alone, fixed gradients). CUDA cases (only with a GPU,
"skipped: no CUDA" otherwise): TF32, CUDA graphs (static shapes), fused optimizer on the GPU.

Each case runs in a fresh interpreter, so none inherits another's memory-allocator state:
the default (per-tensor) optimizer allocates full-size temporaries every step, and whether
glibc hands those back to the OS (fresh pages, page faults, every step) or keeps them
varies: on the reference machine a fresh process landed in either regime from run to run.
The large-tensor AdamW case is therefore run three times: with the default allocator
settings, and with glibc pinned to return freed memory or to keep it. The optimizer rows
print the minor page faults per step of both sides. ``--quick`` runs the cases that need
no environment of their own in one process, to save interpreter start-ups.

    .venv/bin/python benchmarks/accel_extras.py [--quick] [--threads 1]

Full mode takes about 2 minutes on a 2-core CPU, ``--quick`` about 30 s.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from accel_common import machine
from accel_compile import Block, SmallCNN  # the same models as the COMPILE benchmark

from scramjet.accel import (
    AccelerationWarning,
    accelerate_model,
    active_backend,
    engine_of,
    fast_optimizer,
    fast_optimizer_kwargs,
    tf32,
)

Batches = list[tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class Plan:
    """Repetitions (alternated blocks) and steps per block; ``scale`` multiplies blocks."""

    reps: int
    warmup: int
    scale: float


FULL = Plan(reps=9, warmup=2, scale=2.5)
QUICK = Plan(reps=3, warmup=1, scale=0.4)
CNN_LR, BLOCK_LR, MLP_LR = 0.002, 0.05, 0.01  # SGD + momentum 0.9; stable on these tasks


# ----------------------------------------------------------------------------- models


def mlp(width: int, hidden: int) -> nn.Module:
    """A matmul-bound MLP (TF32 case)."""
    return nn.Sequential(
        nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, 10),
    )  # fmt: skip


def many_tensors(layers: int = 64, width: int = 128) -> nn.Module:
    """``layers`` x (Linear + LayerNorm): 4 parameter tensors per layer, all small."""
    mods: list[nn.Module] = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), nn.LayerNorm(width)]
    return nn.Sequential(*mods)


def few_large_tensors(layers: int = 8, width: int = 1024) -> nn.Module:
    """``layers`` x Linear(width, width): few, large tensors (8.4 M parameters by default)."""
    return nn.Sequential(*[nn.Linear(width, width) for _ in range(layers)])


def make_batches(shape: tuple[int, ...], n: int, device: str, seed: int = 0) -> Batches:
    """``n`` fixed batches with fixed random labels (the model learns them by heart)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        x = torch.randn(shape, generator=g)
        y = torch.randint(0, 10, (shape[0],), generator=g)
        out.append((x.to(device), y.to(device)))
    return out


# ----------------------------------------------------------------------------- timing


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def load() -> str:
    return f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "n/a"


def uptime_line() -> str:
    if not hasattr(os, "getloadavg"):
        return "load average: n/a"
    a, b, c = os.getloadavg()
    return f"load average: {a:.2f}, {b:.2f}, {c:.2f}"


@dataclass
class Contender:
    """One side of a comparison: a model, its optimizer, and a context for each step."""

    model: nn.Module
    opt: torch.optim.Optimizer
    context: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext
    mark_step: bool = False  # cudagraph_mark_step_begin() before each step (CUDA graphs)
    step: int = 0
    first_out: torch.Tensor | None = None
    losses: list[torch.Tensor] = field(default_factory=list)

    def train(self, batches: Batches, n: int) -> None:
        for _ in range(n):
            x, y = batches[self.step % len(batches)]
            if self.mark_step:
                torch.compiler.cudagraph_mark_step_begin()
            with self.context():
                out = self.model(x)
                loss = nn.functional.cross_entropy(out.float(), y)
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                self.opt.step()
            if self.step == 0:
                self.first_out = out.detach().float().clone()
            self.losses.append(loss.detach())
            self.step += 1


def minor_faults() -> int:
    """Minor page faults of this process so far (0 where ``resource`` is missing)."""
    try:
        import resource
    except ImportError:
        return 0
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


def timed_block(run: Callable[[], None], device: str) -> float:
    sync(device)
    t0 = time.perf_counter()
    run()
    sync(device)
    return time.perf_counter() - t0


def alternate(
    base_block: Callable[[], float], fast_block: Callable[[], float], reps: int
) -> tuple[list[float], list[float]]:
    """ms/step of each repetition; the order flips every repetition."""
    base_ms: list[float] = []
    fast_ms: list[float] = []
    for r in range(reps):
        if r % 2 == 0:
            base_ms.append(base_block())
            fast_ms.append(fast_block())
        else:
            fast_ms.append(fast_block())
            base_ms.append(base_block())
    return base_ms, fast_ms


def max_abs_diff(a: nn.Module, b: nn.Module) -> tuple[float, float]:
    """(largest |w_a - w_b| over all parameters, largest |w_a|)."""
    diff = big = 0.0
    for pa, pb in zip(a.parameters(), b.parameters()):
        diff = max(diff, float((pa.detach().double() - pb.detach().double()).abs().max()))
        big = max(big, float(pa.detach().abs().max()))
    return diff, big


@dataclass
class Row:
    option: str
    model: str
    base_ms: list[float]
    fast_ms: list[float]
    effect: str
    load: str
    note: str = ""

    def speedup(self) -> float:
        return statistics.median(self.base_ms) / statistics.median(self.fast_ms)

    def show(self) -> None:
        per_rep = [b / f for b, f in zip(self.base_ms, self.fast_ms)]
        print(
            f"{self.option:<30} {self.model:<40} {statistics.median(self.base_ms):9.2f}"
            f" {statistics.median(self.fast_ms):9.2f} {self.speedup():7.2f}x"
            f"  ({min(per_rep):.2f}-{max(per_rep):.2f}x)  {self.load:>5}"
        )
        print(f"{'':<4}{self.effect}")
        if self.note:
            print(f"{'':<4}note: {self.note}")


HEADER = (
    f"{'option':<30} {'model':<40} {'base ms':>9} {'opt ms':>9} {'speed-up':>8}"
    f"  {'(per-rep)':<13} {'load':>5}"
)


# ----------------------------------------------------------------------------- cases


def training_case(
    option: str,
    model_name: str,
    base: Contender,
    fast: Contender,
    batches: Batches,
    block: int,
    plan: Plan,
    device: str,
) -> Row:
    """Warm up both, alternate timed blocks, then compare outputs, losses and weights."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = {}
        for name, c in (("base", base), ("option", fast)):
            first[name] = 1e3 * timed_block(functools.partial(c.train, batches, 1), device)
            if plan.warmup > 1:
                timed_block(functools.partial(c.train, batches, plan.warmup - 1), device)

        def block_of(c: Contender) -> Callable[[], float]:
            return lambda: 1e3 * timed_block(lambda: c.train(batches, block), device) / block

        base_ms, fast_ms = alternate(block_of(base), block_of(fast), plan.reps)
    assert base.first_out is not None and fast.first_out is not None
    d_out = float((fast.first_out.double() - base.first_out.double()).abs().max())
    big_out = float(base.first_out.abs().max())
    cycle = len(batches)
    loss_b = float(torch.stack(base.losses[-cycle:]).float().mean())
    loss_f = float(torch.stack(fast.losses[-cycle:]).float().mean())
    d_w, big_w = max_abs_diff(base.model, fast.model)
    effect = (
        f"results: step 1 max|dout| {d_out:.2g} (max|out| {big_out:.2g}); after {base.step} "
        f"steps loss {loss_b:.4f} -> {loss_f:.4f} (diff {loss_f - loss_b:+.2g}), "
        f"max|dw| {d_w:.2g} ({d_w / big_w:.2g} of max|w|)"
    )
    notes = []
    if max(first.values()) > 3 * max(statistics.median(fast_ms), statistics.median(base_ms)):
        notes.append(f"first step {first['option'] / 1e3:.1f} s (base {first['base'] / 1e3:.1f} s)")
    dropped = [str(w.message)[:160] for w in caught if issubclass(w.category, AccelerationWarning)]
    if dropped:
        notes.append("; ".join(dropped))
    return Row(option, model_name, base_ms, fast_ms, effect, load(), "; ".join(notes))


def sgd(model: nn.Module, lr: float) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)


def wrapped_pair(
    ref: nn.Module,
    device: str,
    lr: float,
    base_kwargs: dict[str, Any],
    fast_kwargs: dict[str, Any],
) -> tuple[Contender, Contender]:
    """Two ``accelerate_model`` wrappers of copies of ``ref``, differing in the option."""
    base = accelerate_model(copy.deepcopy(ref).to(device), **base_kwargs)
    fast = accelerate_model(copy.deepcopy(ref).to(device), **fast_kwargs)
    return Contender(base, sgd(base, lr)), Contender(fast, sgd(fast, lr))


def optimizer_case(
    opt_cls: type[torch.optim.Optimizer],
    model_name: str,
    make: Callable[[], nn.Module],
    device: str,
    plan: Plan,
    block: int,
) -> Row:
    """``opt_cls`` default implementation vs ``fast_optimizer(opt_cls(...))``: step only.

    Both see the same fixed gradients (4 sets, cycled); each has its own copy of them.
    """
    torch.manual_seed(0)
    ref = make().to(device)
    models = [copy.deepcopy(ref), copy.deepcopy(ref)]
    kwargs: dict[str, Any] = {"lr": 1e-3}
    if opt_cls in (torch.optim.AdamW, torch.optim.Adam):
        kwargs["weight_decay"] = 0.01
    opts = [opt_cls(models[0].parameters(), **kwargs)]
    opts.append(fast_optimizer(opt_cls(models[1].parameters(), **kwargs)))
    g = torch.Generator().manual_seed(2)
    grads = [[torch.randn(p.shape, generator=g) * 1e-2 for p in ref.parameters()] for _ in range(4)]
    own = [[[t.to(device, copy=True) for t in s] for s in grads] for _ in range(2)]
    steps = [0, 0]

    def run(i: int, n: int) -> None:
        params = list(models[i].parameters())
        for _ in range(n):
            for p, gr in zip(params, own[i][steps[i] % len(grads)]):
                p.grad = gr
            opts[i].step()
            steps[i] += 1

    for i in (0, 1):
        timed_block(functools.partial(run, i, plan.warmup), device)

    faults = [0, 0]  # minor page faults during the timed blocks

    def block_of(i: int) -> Callable[[], float]:
        def timed() -> float:
            before = minor_faults()
            ms = 1e3 * timed_block(lambda: run(i, block), device) / block
            faults[i] += minor_faults() - before
            return ms

        return timed

    base_ms, fast_ms = alternate(block_of(0), block_of(1), plan.reps)
    d_w, big_w = max_abs_diff(models[0], models[1])
    timed_steps = plan.reps * block
    chosen = fast_optimizer_kwargs(opt_cls, device) or {"(nothing)": True}
    default = "per-tensor loop" if device == "cpu" else "torch default (foreach on CUDA)"
    option = f"fast_optimizer({opt_cls.__name__})"
    effect = (
        f"results: after {steps[0]} steps max|dw| {d_w:.2g} ({d_w / big_w:.2g} of max|w|); "
        f"baseline = {opt_cls.__name__} default ({default}), option = "
        + ", ".join(f"{k}={v}" for k, v in chosen.items())
        + f"; page faults/step {faults[0] / timed_steps:.0f} vs {faults[1] / timed_steps:.0f}"
    )
    return Row(option, model_name, base_ms, fast_ms, effect, load())


def blocks(n: int, plan: Plan, device: str) -> int:
    """Steps per timed block: ``n`` scaled by the plan, 10x on CUDA (faster steps)."""
    return max(1, round(n * plan.scale * (10 if device == "cuda" else 1)))


EAGER: dict[str, Any] = {"backends": ["PYTORCH"]}
CNN_BATCH = (32, 3, 32, 32)
BLOCK_BATCH = (16, 64, 128)
MANY = "64x(Linear 128 + LayerNorm): 256 tensors"
LARGE = "8x Linear 1024: 16 tensors, 8.4 M params"


def channels_last_cnn(plan: Plan, device: str) -> Row:
    torch.manual_seed(0)
    base, fast = wrapped_pair(SmallCNN(), device, CNN_LR, EAGER, {**EAGER, "channels_last": True})
    batches = make_batches(CNN_BATCH, 4, device)
    step = blocks(5, plan, device)
    return training_case("channels_last=True", "small CNN, batch 32", base, fast, batches, step,
                         plan, device)  # fmt: skip


def bf16_cnn(plan: Plan, device: str) -> Row:
    torch.manual_seed(0)
    base, fast = wrapped_pair(SmallCNN(), device, CNN_LR, EAGER, {**EAGER, "autocast": "bf16"})
    batches = make_batches(CNN_BATCH, 4, device)
    step = blocks(2, plan, device)
    return training_case('autocast="bf16"', "small CNN, batch 32", base, fast, batches, step,
                         plan, device)  # fmt: skip


def bf16_block(plan: Plan, device: str) -> Row:
    torch.manual_seed(0)
    base, fast = wrapped_pair(Block(), device, BLOCK_LR, EAGER, {**EAGER, "autocast": "bf16"})
    batches = make_batches(BLOCK_BATCH, 4, device, seed=1)
    step = blocks(2, plan, device)
    return training_case('autocast="bf16"', "transformer block, 16x64x128", base, fast, batches,
                         step, plan, device)  # fmt: skip


def adamw_many(plan: Plan, device: str) -> Row:
    block = blocks(10, plan, device)
    return optimizer_case(torch.optim.AdamW, MANY, many_tensors, device, plan, block)


def adamw_large(plan: Plan, device: str) -> Row:
    block = blocks(10, plan, device)
    return optimizer_case(torch.optim.AdamW, LARGE, few_large_tensors, device, plan, block)


def adamw_large_kept(plan: Plan, device: str) -> Row:
    row = adamw_large(plan, device)
    row.model = LARGE.split(":")[0] + ", malloc keeps memory"
    row.note = f"environment: {KEEP_MEMORY}"
    return row


def adamw_large_returned(plan: Plan, device: str) -> Row:
    row = adamw_large(plan, device)
    row.model = LARGE.split(":")[0] + ", malloc returns memory"
    row.note = f"environment: {RETURN_MEMORY}"
    return row


def rmsprop_many(plan: Plan, device: str) -> Row:
    block = blocks(10, plan, device)
    return optimizer_case(torch.optim.RMSprop, MANY, many_tensors, device, plan, block)


def tf32_case(
    name: str, make: Callable[[], nn.Module], shape: tuple[int, ...], lr: float
) -> Callable[[Plan, str], Row]:
    def case(plan: Plan, device: str) -> Row:
        torch.manual_seed(0)
        ref = make()
        batches = make_batches(shape, 4, device)
        plain = [copy.deepcopy(ref).to(device), copy.deepcopy(ref).to(device)]
        base = Contender(plain[0], sgd(plain[0], lr), context=lambda: tf32(False))
        fast = Contender(plain[1], sgd(plain[1], lr), context=lambda: tf32(True))
        step = blocks(5, plan, device)
        row = training_case("tf32(True)", name, base, fast, batches, step, plan, device)
        row.note = "; ".join(x for x in (row.note, "baseline: set_tf32(False)") if x)
        return row

    return case


def cuda_graphs_block(plan: Plan, device: str) -> Row:
    """COMPILE vs COMPILE + ``cuda_graphs=True`` on a launch-bound model, static shapes."""
    torch.manual_seed(0)
    compile_kw: dict[str, Any] = {"backends": ["COMPILE"]}
    base, fast = wrapped_pair(
        Block(), device, BLOCK_LR, compile_kw, {**compile_kw, "cuda_graphs": True}
    )
    base.mark_step = fast.mark_step = True
    batches = make_batches((8, 64, 128), 4, device, seed=1)
    graphs_plan = Plan(plan.reps, max(plan.warmup, 3), plan.scale)  # cudagraph trees warm up
    step = blocks(5, plan, device)
    row = training_case("cuda_graphs=True (COMPILE)", "transformer block, 8x64x128", base, fast,
                        batches, step, graphs_plan, device)  # fmt: skip
    backends = f"active: base {active_backend(base.model)}, option {active_backend(fast.model)}"
    dropped = {**engine_of(base.model).dropped, **engine_of(fast.model).dropped}
    row.note = "; ".join(x for x in (row.note, backends, str(dropped) if dropped else "") if x)
    return row


# glibc, pinned either way (a fixed threshold turns off its dynamic adjustment): a high
# mmap/trim threshold keeps freed blocks in the heap (no fresh pages); glibc's initial
# 128 KiB threshold maps every large temporary afresh and unmaps it when freed.
KEEP_MEMORY = "MALLOC_MMAP_THRESHOLD_=67108864 MALLOC_TRIM_THRESHOLD_=268435456"
RETURN_MEMORY = "MALLOC_MMAP_THRESHOLD_=131072"

# id -> (function, extra environment); each case runs in a fresh process (see main).
CPU_CASES: dict[str, tuple[Callable[[Plan, str], Row], str]] = {
    "channels_last": (channels_last_cnn, ""),
    "bf16_cnn": (bf16_cnn, ""),
    "bf16_block": (bf16_block, ""),
    "adamw_many": (adamw_many, ""),
    "adamw_large": (adamw_large, ""),
    "adamw_large_returned": (adamw_large_returned, RETURN_MEMORY),
    "adamw_large_kept": (adamw_large_kept, KEEP_MEMORY),
    "rmsprop_many": (rmsprop_many, ""),
}
CUDA_CASES: dict[str, tuple[Callable[[Plan, str], Row], str]] = {
    "tf32_mlp": (
        tf32_case("MLP 1024-4096-4096-10, batch 512", lambda: mlp(1024, 4096), (512, 1024), MLP_LR),
        "",
    ),
    "tf32_cnn": (tf32_case("small CNN, batch 256", SmallCNN, (256, 3, 32, 32), CNN_LR), ""),
    "cuda_graphs": (cuda_graphs_block, ""),
    "adamw_large_cuda": (adamw_large, ""),
}


def run_case(case: str, plan: Plan, threads: int) -> None:
    """Child process: run one case and print its row."""
    torch.set_num_threads(threads)
    fn, _ = {**CPU_CASES, **CUDA_CASES}[case]
    fn(plan, "cpu" if case in CPU_CASES else "cuda").show()


def spawn(case: str, env_extra: str, args: argparse.Namespace) -> None:
    """Run ``case`` in a fresh interpreter: no case inherits another's allocator state."""
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--case",
        case,
        "--threads",
        str(args.threads),
    ]
    if args.quick:
        cmd.append("--quick")
    env = dict(os.environ)
    for item in env_extra.split():
        key, value = item.split("=", 1)
        env[key] = value
    sys.stdout.flush()
    rc = subprocess.run(cmd, env=env, check=False).returncode
    if rc:
        print(f"{case}: failed (exit status {rc}); the other figures stand")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="3 repetitions, short blocks")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    if args.case:
        run_case(args.case, plan, args.threads)
        return
    start = time.perf_counter()
    torch.set_num_threads(args.threads)
    print(machine())
    print(f"start: {uptime_line()}")
    print(
        f"{plan.reps} alternated repetitions per case, "
        + ("most cases in one process (--quick)" if args.quick else "each case in a fresh process")
        + "; ms/step = median over them; speed-up = base / option (> 1: the option is faster)"
    )
    print(HEADER)
    cases = dict(CPU_CASES, **(CUDA_CASES if torch.cuda.is_available() else {}))
    for case, (_, env_extra) in cases.items():
        if args.quick and not env_extra:
            run_case(case, plan, args.threads)  # --quick: in this process, to save start-ups
        else:
            spawn(case, env_extra, args)
    if not torch.cuda.is_available():
        print("tf32(True): skipped: no CUDA")
        print("cuda_graphs=True: skipped: no CUDA")
    print(f"end: {uptime_line()}; {time.perf_counter() - start:.0f} s in all")


if __name__ == "__main__":
    main()
