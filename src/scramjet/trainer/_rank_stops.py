"""Stops decided on one rank, taken by every rank at the same point.

Across processes, each rank runs its own callbacks. A callback's :class:`StopTrainingError`
raised on one rank only (a value that rank holds for itself) must end the loop on every rank
at the same optimizer step: a rank that leaves alone leaves the others waiting in a
collective until the process group's timeout. So while a training run has several
processes, a callback's stop is held on the rank that raised it and the ranks vote on it:
about once a second at an optimizer update (:class:`StepVote`, one all-reduce of a few
integers; the gaps between votes grow from two steps, so fast first steps do not put the
next vote far off), and at the start of the run and at each epoch's end, before its
checkpoint is written. A stop the callback raises on every rank
alike (``every_rank``, as :class:`TerminateOnNaNCallback`'s) is not held.

``trainer.stop_training()`` and ``trainer.end_epoch()`` act at once on the rank that calls
them, so that every rank calling them at the same step stops exactly there; at the epoch's
end a ``stop_training()`` from one rank's callbacks is voted on too.

Each rank's vote is a code: 1 when it holds a callback's stop, plus 2 when the stop counts
as ``stop_training()`` (recorded so that a rerun stops too), plus 4 when ``train()`` raises
it as a failure (``reraise``: never recorded, and raised on every rank). A stop voted for by
any rank stops every rank; ranks that did not decide it stop with an error naming the rank
that did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from scramjet.callbacks.base import StopTrainingError
from scramjet.runtime import distributed as dist
from scramjet.runtime._step_vote import StepVote

if TYPE_CHECKING:
    from scramjet.trainer import Trainer

#: About how many seconds between two background votes at optimizer updates.
CHECK_INTERVAL_S = 1.0


class RankStops:
    """One training run's held stop on this rank, and the votes that settle it."""

    def __init__(self, trainer: Trainer, interval_s: float | None = None) -> None:
        interval_s = CHECK_INTERVAL_S if interval_s is None else interval_s
        self.trainer = trainer
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.held: StopTrainingError | None = None  # a callback's stop, not yet agreed
        self.held_records = False  # it counts as stop_training() once agreed
        # Waited for at each check: an all-reduce left in flight would make a stalled rank
        # surface in the next gradient all-reduce as gloo's "pair closure", not a timeout.
        self._vote = StepVote(self.world_size, interval_s, background=False)

    def hold(self, stop: StopTrainingError, records: bool) -> None:
        """Keep a callback's stop until the ranks agree on it (the first one is kept)."""
        if self.held is None:
            self.held, self.held_records = stop, records

    def at_update(self) -> StopTrainingError | None:
        """After an optimizer update, on every rank. At a check, the stop this rank takes
        when any rank holds one (its own when it holds one)."""
        state = self.trainer.state
        if not self._vote.due(state.global_step):  # most updates: nothing to build or send
            return None
        values = [0] * self.world_size
        held = self.held
        values[self.rank] = 0 if held is None else 1 + 2 * self.held_records + 4 * held.reraise
        agreed = self._vote.vote(state.global_step, values)
        if agreed is None or not any(agreed):
            return None
        return self._take(agreed, None, f"at step {state.global_step} (epoch {state.epoch + 1})")

    def agree_now(self, stop: StopTrainingError | None, where: str) -> StopTrainingError | None:
        """One synchronous vote on every rank (the run's start, an epoch's end): ``stop`` is
        this rank's, if any; returns the stop every rank takes, or None. A ``stop_training()``
        asked for on one rank is taken by all."""
        code = 2 if self.trainer.state.stop_requested or (self.held and self.held_records) else 0
        if stop is not None or self.held is not None:
            code += 1 + 4 * bool((stop or self.held).reraise)  # type: ignore[union-attr]
        votes = torch.zeros(self.world_size, dtype=torch.int64, device=dist._comm_device())
        votes[self.rank] = code
        codes = [int(v) for v in dist.reduce(votes, op="sum", check=False).tolist()]
        return self._take(codes, stop, where)

    def _take(
        self, codes: list[int], stop: StopTrainingError | None, where: str
    ) -> StopTrainingError | None:
        """The stop this rank takes from every rank's code: its own when it has one, else
        one naming the rank that decided. A stop recorded as ``stop_training()`` on one rank
        is recorded on all, so the checkpoint keeps it whichever rank writes it; the
        checkpoint holds rank 0's callback states, so a stop another rank's early stopping
        decided, which rank 0's count does not show, is recorded as ``stop_training()``."""
        stop, self.held = stop or self.held, None
        deciders = [r for r, code in enumerate(codes) if code & 1]
        failed = any(code & 4 for code in codes)  # a failure: no rerun may load it as a stop
        if not failed and (any(code & 2 for code in codes) or (deciders and not codes[0] & 1)):
            self.trainer.state.stop_requested = True  # a rerun with resume_from="auto" too
        if deciders and stop is None:
            stop = StopTrainingError(
                f"rank {deciders[0]} stopped the run {where}; every rank stops with it",
                reraise=failed,
            )
        return stop if deciders else None

    def finish(self) -> None:
        """Forget the check steps (when the run ends)."""
        self._vote.finish()
