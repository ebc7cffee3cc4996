"""The training loop: :class:`Trainer` and the state it keeps.

``trainer.py`` holds the one ``Trainer`` class (every hook, and the train / evaluate /
predict orchestration); ``state.py`` its run settings, counters and metric history;
``data_order.py`` the seeded, resumable order of the data (its samplers in
``samplers.py``); ``checks.py`` the
argument checks that turn bad input into clear errors.
"""

from scramjet.trainer.state import MetricNotFoundError, RunConfig, RunHistory, TrainState
from scramjet.trainer.trainer import Trainer

__all__ = ["MetricNotFoundError", "RunConfig", "RunHistory", "TrainState", "Trainer"]
