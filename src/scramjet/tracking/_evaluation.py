"""A standalone ``trainer.evaluate()`` (after ``train()``, or with no training at all, e.g.
of a loaded checkpoint) recorded by an ``Experiment``: its numbers become the results file
``results/evaluate.json`` (``evaluate_2.json``, ... for the next ones), apart from the
training epochs' evaluation rows of ``metrics.csv``, and reach every logger as
``evaluate/<metric>``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: The results name of a standalone evaluation (``results/<name>.json``).
EVALUATION_RESULTS = "evaluate"


def metric_counts(history: Any) -> dict[str, int]:
    """How many values each metric of the run history holds now."""
    return {name: len(history.get_metric_values(name)) for name in history.get_metric_names()}


def new_values(history: Any, before: dict[str, int]) -> dict[str, float]:
    """The numbers the history received since ``before`` (the last value of each metric)."""
    new: dict[str, float] = {}
    for name in history.get_metric_names():
        values = history.get_metric_values(name)
        if len(values) > before.get(name, 0) and _is_number(values[-1]):
            new[name] = float(values[-1])
    return new


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return not hasattr(value, "__len__") or getattr(value, "ndim", 1) == 0


def results_name(run_dir: Path) -> str:
    """``evaluate``, then ``evaluate_2``, ``evaluate_3``, ...: one file per evaluation."""
    folder = run_dir / "results"
    name, index = EVALUATION_RESULTS, 1
    while (folder / f"{name}.json").exists():
        index += 1
        name = f"{EVALUATION_RESULTS}_{index}"
    return name


__all__ = ["EVALUATION_RESULTS", "metric_counts", "new_values", "results_name"]
