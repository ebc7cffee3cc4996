"""Per-step values of a run, kept as tensors until they are written (one device sync)."""

from __future__ import annotations

from collections import defaultdict

import torch

from scramjet.runtime import distributed as dist
from scramjet.runtime.distributed import PendingReduce
from scramjet.tracking._params import plain_results
from scramjet.tracking.loggers.base import MetricRow

Value = torch.Tensor | float | PendingReduce


class StepBuffer:
    """Values logged per optimizer step, waiting for the next flush.

    Tensors stay on their device (no sync per step); :meth:`rows` copies them all at once.
    A name logged more than once for one step (the losses of an accumulation window's
    micro-batches) is averaged. Each row carries the wall time of its step (the latest
    time noted for it), not the time of the flush.
    """

    def __init__(self) -> None:
        self._entries: list[tuple[int, str, Value]] = []
        self._times: dict[int, float] = {}

    def __bool__(self) -> bool:
        return bool(self._entries)

    def add(self, step: int, name: str, value: Value) -> None:
        """Keep one value (a detached tensor, a float, or a reduce on its way) for ``step``."""
        self._entries.append((step, name, value))

    def note_time(self, step: int, wall_time: float) -> None:
        """Record when ``step`` happened (the latest time noted wins)."""
        if wall_time > self._times.get(step, 0.0):
            self._times[step] = wall_time

    def clear(self) -> None:
        """Forget every value and time."""
        self._entries, self._times = [], {}

    def drop_unfinished(self) -> None:
        """Forget the reduces still on their way (after a failure, another rank may never
        take part in them: waiting could block until the collective timeout)."""
        self._entries = [
            e for e in self._entries if not isinstance(e[2], PendingReduce) or e[2].done()
        ]

    def rows(self, epoch: int, default_time: float, before: int | None = None) -> list[MetricRow]:
        """One row per step (in step order), for the steps before ``before`` (every step
        when None); those leave the buffer, later ones stay (values of the current step
        may still come: callbacks after the Experiment log in the same event)."""
        if before is None:
            taken, kept = self._entries, []
        else:
            taken = [e for e in self._entries if e[0] < before]
            kept = [e for e in self._entries if e[0] >= before]
        values, dtypes = _to_floats([value for _, _, value in taken])
        sums: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        kinds: dict[tuple[int, str], set[torch.dtype | None]] = defaultdict(set)
        for (step, name, _), number, dtype in zip(taken, values, dtypes):
            sums[step][name].append(number)
            kinds[(step, name)].add(dtype)
        rows = [
            MetricRow(
                scope="step",
                step=step,
                epoch=epoch,
                time=self._times.get(step, default_time),
                metrics={n: _mean(vs, kinds[(step, n)]) for n, vs in named.items()},
            )
            for step, named in sorted(sums.items())
        ]
        self._times = {k: v for k, v in self._times.items() if k not in sums}
        self._entries = kept
        return rows


class StepLosses:
    """The training loss of each optimizer step in a multi-process run: the loss of the
    global batch, as one process training on it would log.

    Every rank keeps the losses of its micro-batches; at the step's end their mean is
    combined over the ranks by one asynchronous all-reduce (no wait and no device sync
    there). The writing rank keeps the result for its row; the others wait for theirs
    at the next flush (:meth:`settle`). Losses normalised by every process's items
    (``num_items_in_batch``) are parts of the global loss: they are summed.
    """

    def __init__(self) -> None:
        self._losses: list[torch.Tensor] = []
        self._summed = False
        self._in_flight: list[PendingReduce] = []

    def add(self, loss: torch.Tensor, summed: bool) -> None:
        """Keep one micro-batch's loss (detached)."""
        self._losses.append(loss.detach())
        self._summed = summed

    def step_value(self, keep: bool) -> PendingReduce | None:
        """Start combining the step's loss over the ranks (collective: every rank calls
        it after each update); ``keep``: the caller writes the result."""
        if not self._losses:
            return None
        losses = self._losses  # one per micro-batch: no stack without accumulation
        local = (
            losses[0].float()
            if len(losses) == 1
            else torch.stack([x.float() for x in losses]).mean()
        )
        self._losses = []
        pending = dist.reduce_async(local, "sum" if self._summed else "mean")
        if not keep:
            self._in_flight.append(pending)
        return pending

    def settle(self) -> None:
        """Wait for the reduces this rank does not write (at each flush)."""
        for pending in self._in_flight:
            pending.result()
        self._in_flight = []

    def clear(self) -> None:
        """Forget losses not combined yet (a new run)."""
        self._losses, self._in_flight = [], []


def _mean(values: list[float], dtypes: set[torch.dtype | None]) -> float:
    """The mean of one name's values at one step (the micro-batches of an accumulation
    window): in the values' precision when they all share a float dtype narrower than
    float64 (the mean of float32 losses is a float32 value, written as its shortest decimal)."""
    if len(values) == 1:
        return values[0]
    mean = sum(values) / len(values)
    (dtype,) = dtypes if len(dtypes) == 1 else (None,)
    if dtype is None:
        return mean
    return float(plain_results(torch.tensor(mean, dtype=dtype)))


def _to_floats(values: list[Value]) -> tuple[list[float], list[torch.dtype | None]]:
    """Python floats, with one copy per device and dtype for the tensors among ``values``,
    and the float dtype of each value narrower than float64 (None for the others).

    A float16, bfloat16 or float32 value becomes the shortest decimal that reads back as
    the same value in its precision (a float32 loss of 0.3 is 0.3, not
    0.30000001192092896); a float64 one keeps every digit."""
    values = [v.result() if isinstance(v, PendingReduce) else v for v in values]
    out: list[float] = [v if isinstance(v, float) else 0.0 for v in values]
    narrow: list[torch.dtype | None] = [None] * len(values)
    groups: dict[tuple[torch.device, torch.dtype], list[int]] = defaultdict(list)
    for i, value in enumerate(values):
        if isinstance(value, torch.Tensor):
            dtype = value.dtype if value.dtype.is_floating_point else torch.float64
            groups[(value.device, dtype)].append(i)
    for (_, dtype), indices in groups.items():
        stacked = torch.stack([values[i].reshape(()).to(dtype) for i in indices])  # type: ignore[union-attr]
        for i, number in zip(indices, plain_results(stacked.cpu())):
            out[i] = float(number)
            narrow[i] = dtype if dtype.itemsize < 8 else None
    return out, narrow
