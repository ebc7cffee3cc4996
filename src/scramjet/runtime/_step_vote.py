"""Values every rank agrees on at the same optimizer step, without a collective at every step.

Ranks reach a step at different moments, and a decision taken on one of them (a signal, a
callback's stop) must take effect on all of them at the same step, or the others wait in a
collective for a rank that has left. :class:`StepVote` all-reduces (maximum) a few integers
at agreed steps, about every ``interval_s`` seconds. The all-reduce also carries rank 0's
choice of the next check step, so every rank checks at the same steps whatever its own
clock says. In the background (``background=True``), each check starts its all-reduce and
every rank reads it at the following step (by then it has usually finished, so the loop
seldom waits for the network). Otherwise each check waits for its own all-reduce: nothing
stays in flight between checks, so a rank that stalls is reported by the collective the
others are waiting in.

Rank 0 sizes the gap to the next check from the steps since the previous check: about
``interval_s`` seconds at the slower of the last two gaps' mean step time, and at most four
times as many steps as the last gap held. So a run's first steps, often fast because the
DataLoader had batches ready before training started, do not push the next check far out:
the gaps grow from two steps as the measured steps show what a step really takes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from scramjet.runtime import distributed as dist

_MAX_STEPS_BETWEEN = 10_000
_FIRST_GAP = 2  # steps from the first check to the second
_GROWTH = 4  # a gap holds at most this many times the steps of the gap measured before it


class StepVote:
    """The element-wise maximum, over the ranks, of ``size`` integers, read at agreed steps.

    Args:
        size: How many integers each rank gives at each check.
        interval_s: About how many seconds between checks (rank 0 measures its steps); 0
            checks at every step.
        background: Read each check's result at the following step instead of waiting for
            it at the check.
    """

    def __init__(self, size: int, interval_s: float = 1.0, *, background: bool = True) -> None:
        self.size, self.interval_s, self.background = size, float(interval_s), background
        self._pending: tuple[Any, torch.Tensor] | None = None  # the last all-reduce started
        self._unread = False  # it is read at the next step (background)
        self._next_check = 0  # the next step that checks or reads (the same on every rank)
        self._last: tuple[int, float] | None = None  # (step, time) of rank 0's last check
        self._per_step = 0.0  # rank 0: mean seconds per step in the gap before the last

    def due(self, step: int) -> bool:
        """Whether ``step`` checks or reads a check (the same answer on every rank)."""
        return step >= self._next_check

    def vote(self, step: int, values: Sequence[int]) -> list[int] | None:
        """Call at every optimizer step on every rank with this rank's ``values``.

        Returns:
            None at steps that read no result; else the maximum over the ranks of the values
            given at the check now (waiting for it) or, in the background, at the check of
            the previous step.
        """
        if not self.due(step):
            return None
        if self.background:
            return self._in_background(step, values)
        agreed: list[int] = dist.reduce(self._ballot(values, step), op="max", check=False).tolist()
        self._next_check = max(agreed.pop(), step + 1)
        return agreed

    def _in_background(self, step: int, values: Sequence[int]) -> list[int] | None:
        """Read the all-reduce the previous step started, if any; start one at a check."""
        agreed = None
        if self._unread and self._pending is not None:
            work, result = self._pending
            work.wait()
            agreed = result.tolist()
            self._unread, self._next_check = False, max(agreed.pop(), step)
            if step < self._next_check:
                return agreed
        flag = self._ballot(values, step)
        work = torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX, async_op=True)
        self._pending, self._unread, self._next_check = (work, flag), True, step + 1
        return agreed

    def _ballot(self, values: Sequence[int], step: int) -> torch.Tensor:
        """This rank's values, then rank 0's choice of the next check step."""
        proposal = step + self._steps_to_next(step) if dist.get_rank() == 0 else 0
        return torch.tensor([*values, proposal], dtype=torch.int64, device=dist._comm_device())

    def _steps_to_next(self, step: int) -> int:
        """How many steps make about ``interval_s`` seconds (rank 0 measures), at most
        ``_GROWTH`` times the steps since the previous check."""
        now, last, self._last = time.monotonic(), self._last, (step, time.monotonic())
        if last is None or step <= last[0]:
            return 1 if self.interval_s <= 0 else _FIRST_GAP  # 0: a check at every step
        steps = step - last[0]
        per_step = max(now - last[1], 1e-9) / steps
        slower, self._per_step = max(per_step, self._per_step), per_step
        return max(1, min(_MAX_STEPS_BETWEEN, _GROWTH * steps, int(self.interval_s / slower)))

    def finish(self) -> None:
        """Wait for the all-reduce still in flight, if any (every rank, when the run ends)."""
        pending, self._pending, self._unread = self._pending, None, False
        self._next_check, self._last, self._per_step = 0, None, 0.0
        if pending is not None:
            pending[0].wait()
