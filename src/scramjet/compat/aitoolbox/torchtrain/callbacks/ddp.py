"""AIToolbox's multi-process (DDP) callback: :class:`DistributedSamplerSetEpoch`."""

from __future__ import annotations

from typing import Any

from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import AbstractCallback

__all__ = ["DistributedSamplerSetEpoch"]


class DistributedSamplerSetEpoch(AbstractCallback):
    """Gives each ``DistributedSampler`` the epoch number at the start of every epoch.

    A DistributedSampler shuffles with a seed derived from its epoch; without
    ``set_epoch`` every epoch would repeat the same order.

    Args:
        train_sampler, validation_sampler, test_sampler: the samplers (None skips one).
    """

    def __init__(
        self, train_sampler: Any, validation_sampler: Any = None, test_sampler: Any = None
    ) -> None:
        super().__init__("Distributed sampler set epoch")
        self.train_sampler = train_sampler
        self.validation_sampler = validation_sampler
        self.test_sampler = test_sampler
        self.samplers = [
            s for s in (train_sampler, validation_sampler, test_sampler) if s is not None
        ]
        for sampler in self.samplers:
            if not callable(getattr(sampler, "set_epoch", None)):
                raise TypeError(
                    f"DistributedSamplerSetEpoch needs samplers with set_epoch() (e.g. "
                    f"torch.utils.data.DistributedSampler); received {type(sampler).__name__}."
                )

    def on_epoch_begin(self) -> None:
        """``set_epoch(loop.epoch)`` on every sampler."""
        for sampler in self.samplers:
            sampler.set_epoch(self.train_loop_obj.epoch)
