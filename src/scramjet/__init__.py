"""scramjet: PyTorch training that is short to write, fast to run and easy to track.

Example:
    >>> from scramjet import Trainer, TrainerCallback  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

# Public names, imported on first use so `import scramjet` stays light.
_LAZY = {
    "Trainer": "scramjet.trainer",
    "TrainerCallback": "scramjet.callbacks",
    "DEFAULT_CALLBACKS": "scramjet.callbacks",
    "StopTrainingError": "scramjet.callbacks",
    "RunHistory": "scramjet.trainer",
    "TrainerPlaceholderValues": "scramjet.schedulers",
    "CosineWarmupScheduler": "scramjet.schedulers",
    "WSDScheduler": "scramjet.schedulers",
    "CheckpointManager": "scramjet.checkpoint",
    "seed_everything": "scramjet.runtime.seeding",
}

__all__ = ["__version__", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'scramjet' has no attribute {name!r}")
