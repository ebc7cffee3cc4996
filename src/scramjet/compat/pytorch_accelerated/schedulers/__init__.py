"""pytorch-accelerated's schedulers: a stateful base class, cosine and WSD learning rates."""

from __future__ import annotations

from scramjet.compat.pytorch_accelerated.schedulers.cosine_scheduler import CosineLrScheduler
from scramjet.compat.pytorch_accelerated.schedulers.scheduler_base import (
    SchedulerBase,
    SchedulerConfigError,
    StatefulSchedulerBase,
)
from scramjet.compat.pytorch_accelerated.schedulers.wsd_scheduler import WSDLrScheduler

__all__ = [
    "CosineLrScheduler",
    "SchedulerBase",
    "SchedulerConfigError",
    "StatefulSchedulerBase",
    "WSDLrScheduler",
]
