"""pytorch-accelerated's ``TrainerRunConfig``: scramjet's run settings with the peer's fields.

It is a :class:`scramjet.trainer.RunConfig` (the Trainer reads it as one), with the
peer's extra fields: the DataLoader kwargs in use, the total batch sizes across processes
and accumulation, ``is_distributed`` and ``mixed_precision``. Fields only scramjet has
(``precision``, ``gradient_clip_norm``, ``device``) take defaults, so the peer's keyword
construction works as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scramjet.trainer.state import RunConfig


@dataclass(frozen=True, kw_only=True)
class TrainerRunConfig(RunConfig):
    """Settings of one training run, as ``trainer.run_config`` holds them.

    ``num_update_steps_per_epoch`` is the number of optimizer updates one process makes in
    an epoch (in a distributed run every process makes the same updates);
    ``num_local_update_steps_per_epoch`` is the same number.
    """

    train_dl_kwargs: dict[str, Any] = field(default_factory=dict)
    eval_dl_kwargs: dict[str, Any] = field(default_factory=dict)
    train_total_batch_size: int = 0
    eval_total_batch_size: int = 0
    num_local_update_steps_per_epoch: int | float = 0
    is_distributed: bool = False
    mixed_precision: str = "no"
    gradient_clip_norm: float | None = None
    precision: str = ""
    device: str = "cpu"

    def __post_init__(self) -> None:
        if not self.precision:  # the peer names it mixed_precision
            object.__setattr__(self, "precision", self.mixed_precision)


__all__ = ["TrainerRunConfig"]
