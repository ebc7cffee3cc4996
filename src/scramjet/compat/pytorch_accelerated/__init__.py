"""pytorch-accelerated's names over scramjet's Trainer: migrate by changing the import prefix.

``from scramjet.compat.pytorch_accelerated import Trainer`` (and ``.callbacks``,
``.schedulers``, ``.finetuning``, ``.tracking``, ``.run_config``, ``.utils``) mirror
pytorch-accelerated's modules. There is no second training loop: the Trainer is
:class:`scramjet.Trainer` with the peer's extra methods. See ``docs/compat.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from scramjet.compat.pytorch_accelerated.trainer import (
    DEFAULT_CALLBACKS,
    Trainer,
    TrainerPlaceholderValues,
    TrainerWithTimmScheduler,
)


def notebook_launcher(
    function: Callable[..., Any],
    args: Sequence[Any] = (),
    num_processes: int | None = None,
    **kwargs: Any,
) -> Any:
    """Run ``function(*args)`` in ``num_processes`` processes (forked: works in notebooks).

    One process (the default) runs it here. Several are started with
    :func:`scramjet.runtime.launch` (``start_method="fork"``); a Trainer created inside
    sets up the process group itself. Returns rank 0's result. Other keyword arguments
    (``start_method``, ``max_restarts``) go to ``launch``.
    """
    if num_processes is None or num_processes == 1:
        return function(*args)
    from scramjet.runtime import launch

    kwargs.setdefault("start_method", "fork")
    return launch(function, nprocs=num_processes, args=args, **kwargs)


__all__ = [
    "DEFAULT_CALLBACKS",
    "Trainer",
    "TrainerPlaceholderValues",
    "TrainerWithTimmScheduler",
    "notebook_launcher",
]
