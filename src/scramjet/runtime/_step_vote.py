"""Values every rank agrees on at the same optimizer step, without waiting for the network.

Ranks reach a step at different moments, and a decision taken on one of them (a signal, a
callback's stop) must take effect on all of them at the same step, or the others wait in a
collective for a rank that has left. :class:`StepVote` all-reduces (maximum) a few integers
at agreed steps, about every ``interval_s`` seconds. The all-reduce also carries rank 0's
choice of the following check step, so every rank checks at the same steps whatever its own
clock says. In the background (``background=True``), each check reads the all-reduce the
previous check started (long finished by then) and starts the next one: a value given at
one check is read by every rank at the next, and the loop never waits for the network.
Otherwise each check waits for its own all-reduce: nothing stays in flight between checks,
so a rank that stalls is reported by the collective the others are waiting in.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from scramjet.runtime import distributed as dist

_MAX_STEPS_BETWEEN = 10_000


class StepVote:
    """The element-wise maximum, over the ranks, of ``size`` integers, read at agreed steps.

    Args:
        size: How many integers each rank gives at each check.
        interval_s: About how many seconds between checks (rank 0 measures its steps); 0
            checks at every step.
        background: Read each check's result at the next check instead of waiting for it.
    """

    def __init__(self, size: int, interval_s: float = 1.0, *, background: bool = True) -> None:
        self.size, self.interval_s, self.background = size, float(interval_s), background
        self._pending: tuple[Any, torch.Tensor] | None = None  # the all-reduce in flight
        self._next_check = 0  # the step of the next check (the same on every rank)
        self._last: tuple[int, float] | None = None  # (step, time) of rank 0's last check

    def due(self, step: int) -> bool:
        """Whether ``step`` is a check (the same answer on every rank)."""
        return step >= self._next_check

    def vote(self, step: int, values: Sequence[int]) -> list[int] | None:
        """Call at every optimizer step on every rank with this rank's ``values``.

        Returns:
            None between checks; at a check, the maximum over the ranks of the values given
            now (in the background: at the previous check; zeros at the first).
        """
        if not self.due(step):
            return None
        if not self.background:
            read = dist.reduce(self._ballot(values, step, step + 1), op="max", check=False)
            agreed = read.tolist()
            self._next_check = max(agreed.pop(), step + 1)
            return agreed
        agreed, following = [0] * self.size, step + 1
        if self._pending is not None:
            work, result = self._pending
            work.wait()
            agreed = result.tolist()
            following = max(agreed.pop(), step + 1)
        flag = self._ballot(values, step, following)
        work = torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX, async_op=True)
        self._pending, self._next_check = (work, flag), following
        return agreed

    def _ballot(self, values: Sequence[int], step: int, following: int) -> torch.Tensor:
        """This rank's values, then rank 0's choice of the check after ``following``."""
        proposal = following + self._steps_per_interval(step) if dist.get_rank() == 0 else 0
        return torch.tensor([*values, proposal], dtype=torch.int64, device=dist._comm_device())

    def _steps_per_interval(self, step: int) -> int:
        """How many steps make about ``interval_s`` seconds (rank 0 measures)."""
        now, last, self._last = time.monotonic(), self._last, (step, time.monotonic())
        if last is None or step <= last[0]:
            return 1
        per_step = max(now - last[1], 1e-9) / (step - last[0])
        return max(1, min(_MAX_STEPS_BETWEEN, int(self.interval_s / per_step)))

    def finish(self) -> None:
        """Wait for the all-reduce still in flight, if any (every rank, when the run ends)."""
        pending, self._pending = self._pending, None
        self._next_check, self._last = 0, None
        if pending is not None:
            pending[0].wait()
