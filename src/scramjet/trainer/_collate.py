"""The DataLoader settings of the loaders the Trainer makes, and the collate function
that batches samples when the user gives none (its errors say how to batch such samples)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from torch.utils.data import default_collate

from scramjet.runtime.preemption import worker_init_while_watched


class ExplainedCollate:
    """torch's ``default_collate``, whose errors also say how to batch such samples.

    The Trainer batches with it when no ``collate_fn`` is given: samples that cannot be
    stacked (tensors of different sizes, PIL images, None) then raise an error of the same
    type naming the data and the fix, instead of torch's message alone.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, samples: list[Any]) -> Any:
        try:
            return default_collate(samples)
        except (TypeError, RuntimeError) as error:
            explained = _collate_error(error, samples, self.name)
            raise explained from error


def loader_options(kwargs: Mapping[str, Any], name: str) -> dict[str, Any]:
    """``kwargs`` for a DataLoader the Trainer makes: batching with
    :class:`ExplainedCollate` when they give no ``collate_fn`` and the loader batches
    samples (``batch_size`` not None); worker processes that live through a preemption
    signal sent to the whole process group while a watcher runs (torch ends a worker on
    ``SIGTERM``, which failed the run before it could save)."""
    out = dict(kwargs)
    if isinstance(out.get("batch_size"), np.integer):  # torch takes Python ints only
        out["batch_size"] = int(out["batch_size"])
    if out.get("collate_fn") is None and out.get("batch_size", 1) is not None:
        out["collate_fn"] = ExplainedCollate(name)
    if out.get("num_workers", 0) > 0:
        out["worker_init_fn"] = worker_init_while_watched(out.get("worker_init_fn"))
    return out


def _collate_error(error: Exception, samples: list[Any], name: str) -> Exception:
    leaves = _leaf_types(samples[0] if samples else None)
    if any(t.__module__.startswith("PIL") for t in leaves):
        fix = (
            "Its samples hold PIL images: convert them to tensors in the dataset, e.g. with "
            "torchvision.transforms.v2 (ToImage() and ToDtype(torch.float32, scale=True)) "
            "or torch.as_tensor(numpy.asarray(image))."
        )
    elif type(None) in leaves:
        fix = "A sample holds None (e.g. a missing label): return a value for every field."
    elif isinstance(error, RuntimeError) and "size" in str(error):
        fix = (
            "Its samples differ in size (e.g. sequences of different lengths, images of "
            "different sizes), so they cannot be stacked into one tensor: pad them in a "
            "collate_fn (train(collate_fn=...); evaluate and predict take one too), e.g. "
            "with torch.nn.utils.rnn.pad_sequence, or resize them to one size in the dataset."
        )
    else:
        fix = (
            "Return tensors, numbers or numpy arrays (or dicts, tuples and lists of them) "
            "from the dataset, or pass train(collate_fn=...) to build the batch yourself."
        )
    message = (
        f"{name}: torch's default_collate could not make a batch of {len(samples)} "
        f"sample(s): {error}. {fix}"
    )
    try:
        return type(error)(message)
    except Exception:  # an error type that takes other arguments: keep torch's
        return error


def _leaf_types(value: Any, depth: int = 0) -> set[type]:
    """The types found in a sample, through dicts, tuples and lists."""
    if depth > 4:
        return set()
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return set().union(*(_leaf_types(v, depth + 1) for v in value)) if value else set()
    return {type(value)}
