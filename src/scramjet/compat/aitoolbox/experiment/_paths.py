"""The experiment folder layout AIToolbox's savers share, and its timestamp."""

from __future__ import annotations

import datetime
import os

TIMESTAMP_FORMAT = "%Y-%m-%d_%H-%M-%S"


def timestamp_now() -> str:
    """The current local time as AIToolbox names experiment folders: ``YYYY-mm-dd_HH-MM-SS``."""
    return datetime.datetime.now().strftime(TIMESTAMP_FORMAT)


def experiment_dir(root: str, project_name: str, experiment_name: str, timestamp: str) -> str:
    """``<root>/<project_name>/<experiment_name>_<timestamp>``."""
    return os.path.join(root, project_name, f"{experiment_name}_{timestamp}")


def experiment_subdir(
    root: str, project_name: str, experiment_name: str, timestamp: str, sub: str
) -> str:
    """Create ``<experiment folder>/<sub>`` (and its parents) and return it."""
    path = os.path.join(experiment_dir(root, project_name, experiment_name, timestamp), sub)
    os.makedirs(path, exist_ok=True)
    return path
