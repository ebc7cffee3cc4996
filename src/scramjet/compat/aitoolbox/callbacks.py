"""AIToolbox-style callbacks under their flat import path (``scramjet.compat.aitoolbox.callbacks``).

The AIToolbox callbacks live in ``scramjet.compat.aitoolbox.torchtrain.callbacks`` (one
module per family, as in AIToolbox); this module re-exports the main ones and the
hook-to-event bridge (:func:`to_trainer_callback`, :data:`HOOK_EVENTS`):

====================================  =========================================
AIToolbox hook                        Trainer event
====================================  =========================================
``on_train_begin``                    ``on_training_run_start``
``on_epoch_begin``                    ``on_train_epoch_start``
``on_batch_begin``                    ``on_train_step_start``
``on_after_gradient_update``          ``on_after_gradient_update`` (after backward,
                                      gradients unscaled, before the optimizer
                                      step; once per update)
``on_after_optimizer_step``           ``on_optimizer_step_end``
``on_batch_end``                      ``on_optimizer_step_end`` (once per update)
``on_epoch_end``                      ``on_training_run_epoch_end`` (after validation)
``on_train_end``                      ``on_training_run_end``
====================================  =========================================

It also keeps scramjet's own history reporters with a ``folder`` argument
(:class:`ModelTrainHistoryPlot`, :class:`ModelTrainHistoryFileWriter`) and
:class:`TensorBoardFullTracker`; AIToolbox's reporters, which write into the experiment
folder, are in ``torchtrain.callbacks.performance_eval``.
"""

from __future__ import annotations

import importlib
from typing import Any

_PKG = "scramjet.compat.aitoolbox.torchtrain.callbacks"

#: Public name → module of ``torchtrain.callbacks`` that defines it. Imported on first
#: use, so this module can be imported while ``torchtrain`` itself is being imported.
_WHERE: dict[str, str] = {
    "HISTORY_NAMES": "_bridge",
    "HOOK_EVENTS": "_bridge",
    "history_key": "_bridge",
    "to_trainer_callback": "_bridge",
    "AbstractCallback": "abstract",
    "AbstractExperimentCallback": "abstract",
    "EarlyStopping": "basic",
    "TerminateOnNaN": "basic",
    "GradNormClip": "gradient",
    "GradValueClip": "gradient",
    "GradientStatsPrint": "gradient",
    "ModelTrainHistoryFileWriter": "_flat",
    "ModelTrainHistoryPlot": "_flat",
    "TensorBoardFullTracker": "_flat",
    "TensorboardFullTracker": "_flat",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{_PKG}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
