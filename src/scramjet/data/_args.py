"""Checks of what :class:`~scramjet.data.PackedDataset` is given: indices and loader settings.

Each check says what it received, what it expects and how to fix the call.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch


def one_index(index: Any) -> int:
    """One sample's index as an ``int`` (see :func:`scalar_index`); anything else is refused.

    Raises:
        TypeError: ``index`` is not an integer (a float, a string, a bool...).
    """
    value = scalar_index(index)
    if not isinstance(value, int) or isinstance(index, bool | np.bool_):
        raise TypeError(
            f"a sample index must be an integer; received {type(index).__name__} {index!r}. "
            f"Convert it first, e.g. int(i)."
        )
    return value


def index_array(indices: Any) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Sample indices as an int64 array; values that are not integers are refused (numpy
    would truncate 2.7 to 2, parse "3", and read a boolean mask as samples 0 and 1).

    Raises:
        TypeError: a value is not an integer.
    """
    array = np.asarray(indices)
    if array.size and not np.issubdtype(array.dtype, np.integer):
        first = array.reshape(-1)[0]
        fix = (
            "for a boolean mask, pass np.flatnonzero(mask)"
            if array.dtype == np.bool_
            else "convert them with int()"
        )
        raise TypeError(
            f"sample indices must be integers; received {type(indices).__name__} of "
            f"{array.dtype} values (first: {first!r}): {fix}."
        )
    return array.astype(np.int64, copy=False)


def check_array_index(index: torch.Tensor | np.ndarray) -> None:
    """Refuse a tensor or array batch index that does not hold integers, naming it by its
    dtype and shape (once turned into a list, a mask would read as a list of bools).

    Raises:
        TypeError: a boolean mask (with how to select the rows it marks), or float values.
    """
    kind = type(index).__name__
    shape = tuple(index.shape)
    if isinstance(index, torch.Tensor):
        dtype: Any = index.dtype
        boolean = dtype == torch.bool
        integer = not (dtype.is_floating_point or dtype.is_complex or boolean)
    else:
        dtype = index.dtype
        boolean = dtype == np.bool_
        integer = bool(np.issubdtype(dtype, np.integer))
    if boolean:
        fix = "ds[mask.nonzero().flatten()]" if kind == "Tensor" else "ds[np.flatnonzero(mask)]"
        raise TypeError(
            f"a boolean mask is not a batch index; received a bool {kind} of shape {shape}. "
            f"A batch index lists the samples to read: select the rows the mask marks "
            f"with {fix}."
        )
    size = index.numel() if isinstance(index, torch.Tensor) else index.size
    if not integer and size:
        raise TypeError(
            f"sample indices must be integers; received a {kind} of {dtype} values, shape "
            f"{shape}. Convert it to integers first (e.g. .long() or .astype(np.int64)), "
            f"after checking that its values are whole."
        )


def scalar_index(index: Any) -> Any:
    """``index`` as an ``int`` when it is one sample's index, else unchanged.

    Python and numpy integers, and 0-d integer tensors and arrays (``ds[torch.tensor(3)]``,
    ``ds[np.int64(3)]``), name one sample. A 0-d float or bool tensor is refused: it is
    probably a mistake, and its value would be silently truncated.

    Raises:
        TypeError: a 0-d tensor or array that does not hold an integer.
    """
    if isinstance(index, int | np.integer):
        return int(index)
    if isinstance(index, torch.Tensor | np.ndarray) and index.ndim == 0:
        if isinstance(index, torch.Tensor):
            integer = not (index.dtype.is_floating_point or index.dtype.is_complex)
            integer = integer and index.dtype != torch.bool
        else:
            integer = bool(np.issubdtype(index.dtype, np.integer))
        if not integer:
            raise TypeError(
                f"a 0-d index must hold an integer; received a {type(index).__name__} of "
                f"dtype {index.dtype} ({index!r}). Convert it, e.g. ds[int(i)]."
            )
        return int(index.item())
    return index


def check_reader_options(at_url: bool, prefetch: Any, streaming: Mapping[str, Any]) -> int | None:
    """``prefetch`` as a count of shards (None: the default), and a warning for streaming
    options (``cache_dir``, ``cache_limit``, ``storage_options``) given for a local pack,
    which is read in place and ignores them.

    Raises:
        ValueError: ``prefetch`` is not a whole number >= 0.
    """
    if prefetch is not None and (
        isinstance(prefetch, bool) or not isinstance(prefetch, int | np.integer) or prefetch < 0
    ):
        raise ValueError(
            f"prefetch must be a whole number of shards >= 0 (or None for the default); "
            f"received {prefetch!r}."
        )
    given = [name for name, value in streaming.items() if value is not None]
    if given and not at_url:
        warnings.warn(
            f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to packs at a "
            f"URL (s3://, gs://, file://...); this local pack is read in place, so "
            f"{'it is' if len(given) == 1 else 'they are'} ignored. Leave "
            f"{'it' if len(given) == 1 else 'them'} out.",
            UserWarning,
            stacklevel=3,
        )
    return None if prefetch is None else int(prefetch)


def check_shuffle_window(shuffle_window: Any) -> int | None:
    """``shuffle_window`` as a count of shards >= 1, or None.

    Raises:
        ValueError: a value that is not a whole number >= 1 (a fraction, a string, a bool).
    """
    if shuffle_window is None:
        return None
    if (
        isinstance(shuffle_window, bool)
        or not isinstance(shuffle_window, int | np.integer)
        or shuffle_window < 1
    ):
        raise ValueError(
            f"shuffle_window must be a whole number of shards >= 1 (or None for the default); "
            f"received {type(shuffle_window).__name__} {shuffle_window!r}."
        )
    return int(shuffle_window)


def check_batch_size(batch_size: Any) -> int:
    """A loader's ``batch_size``: an int >= 1.

    Raises:
        TypeError: not an int (a str, a float, a bool...).
        ValueError: an int below 1.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer):
        raise TypeError(
            f"batch_size must be an int (samples per batch); received "
            f"{type(batch_size).__name__} {batch_size!r}. Pass e.g. ds.loader(64)."
        )
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1 (samples per batch); received {batch_size}")
    return int(batch_size)


def check_num_workers(num_workers: Any, backend: str) -> int:
    """A loader's ``num_workers``: an int >= 0 (reading threads, or worker processes).

    Raises:
        TypeError: not an int (None, a str, a float, a bool...).
        ValueError: an int below 0.
    """
    what = "reading threads, 0 for one per core" if backend == "threads" else "worker processes"
    if isinstance(num_workers, bool) or not isinstance(num_workers, int | np.integer):
        raise TypeError(
            f"num_workers must be an int >= 0 ({what}); received "
            f"{type(num_workers).__name__} {num_workers!r}. Pass e.g. num_workers=4."
        )
    if num_workers < 0:
        raise ValueError(
            f"num_workers must be an int >= 0 ({what}); received {num_workers}. Pass 0 or "
            "a positive count."
        )
    return int(num_workers)


def check_generator(generator: Any) -> None:
    """A loader's ``generator``: None or a ``torch.Generator``.

    Raises:
        TypeError: anything else (a seed given as an int, a numpy generator...).
    """
    if generator is not None and not isinstance(generator, torch.Generator):
        fix = (
            f"torch.Generator().manual_seed({generator})"
            if isinstance(generator, int) and not isinstance(generator, bool)
            else "torch.Generator().manual_seed(seed)"
        )
        raise TypeError(
            f"generator must be a torch.Generator or None; received "
            f"{type(generator).__name__} {generator!r}. Pass generator={fix}."
        )


def check_batching_settings(kwargs: Mapping[str, Any]) -> None:
    """Refuse the DataLoader settings that ``ds.loader`` sets itself.

    Its batches are read whole and already collated (dicts of tensors), so a
    ``collate_fn`` would receive a batch rather than a list of samples, and a
    ``batch_sampler`` would replace the batches the loader makes.

    Raises:
        ValueError: ``collate_fn`` or ``batch_sampler`` among the settings.
    """
    if "collate_fn" in kwargs:
        raise ValueError(
            "ds.loader does not take collate_fn: it reads whole batches that are already "
            "collated (dicts of tensors), so collate_fn would get a batch, not a list of "
            "samples. To collate samples your way, use DataLoader(ds, batch_size=..., "
            "collate_fn=...) (it reads through ds.__getitems__); to change a batch, do it "
            "in your loop"
        )
    if "batch_sampler" in kwargs:
        raise ValueError(
            "ds.loader does not take batch_sampler: it makes the batches from batch_size, "
            "sampler and drop_last. Pass those, or use DataLoader(ds, batch_sampler=...), "
            "which reads each batch through ds.__getitems__"
        )


def check_prefetch_factor(kwargs: dict[str, Any]) -> int | None:
    """``prefetch_factor`` among a loader's settings: None (the default) or an int >= 1.

    Raises:
        ValueError: a value that is not an int >= 1 (0 would read nothing ahead).
    """
    if "prefetch_factor" not in kwargs:
        return None
    value = kwargs["prefetch_factor"]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(
            f"prefetch_factor must be an int >= 1 (batches read ahead per worker or thread) "
            f"or None for the default (2); received {value!r}"
        )
    return int(value)


def column_selection(columns: Any, available: list[str]) -> list[str]:
    """The names ``columns=`` selects (all of ``available`` for None; a ``str`` is one
    column, not the letters of its name).

    Raises:
        ValueError: an unknown name, a name given twice, or no name at all.
        TypeError: a set (its order differs between processes).
    """
    if columns is None:
        return list(available)
    if isinstance(columns, set | frozenset) and len(columns) > 1:
        raise TypeError(
            f"columns={columns!r} is a set, whose order (and so the order of every sample's "
            f"columns) can differ between processes; pass a list, e.g. "
            f"columns={sorted(map(str, columns))!r}"
        )
    names = [columns] if isinstance(columns, str) else list(columns)
    unknown = [n for n in names if n not in available]
    if unknown:
        raise ValueError(f"unknown columns {unknown}; this pack has {available}")
    if not names:
        raise ValueError(
            f"columns={columns!r} selects no column, so every sample would be empty; pass "
            f"names from {available}, or columns=None to read them all"
        )
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(
            f"columns={columns!r} names {', '.join(map(repr, twice))} more than once; a "
            f"batch holds each column once, so list each name once"
        )
    return names


def check_transform(transform: Any, names: list[str]) -> None:
    """A dataset's ``transform``: None, a callable, or a mapping of read columns to callables.

    Raises:
        ValueError: a mapping names columns the dataset does not read (a typo, or a column
            left out by ``columns=``): its entries would fail on the first sample.
        TypeError: a transform, or a mapping's value, that cannot be called.
    """
    if transform is None:
        return
    if isinstance(transform, Mapping):
        unknown = [name for name in transform if name not in names]
        if unknown:
            raise ValueError(
                f"transform names columns {unknown} that this dataset does not read; it "
                f"reads {names}. Fix the names, or add those columns to columns="
            )
        for name, fn in transform.items():
            if not callable(fn):
                raise TypeError(
                    f"transform[{name!r}] must be a callable (a function or an augmentation); "
                    f"received {type(fn).__name__} {fn!r}"
                )
    elif not callable(transform):
        raise TypeError(
            f"transform must be a callable on the sample dict or a mapping {{column: "
            f"callable}}; received {type(transform).__name__} {transform!r}"
        )


def check_shuffle_and_sampler(shuffle: bool, sampler: Any) -> None:
    """Refuse ``shuffle=True`` with a ``sampler``, as a DataLoader does.

    Raises:
        ValueError: both given (the sampler's order would be used, the shuffle ignored).
    """
    if shuffle and sampler is not None:
        raise ValueError(
            f"shuffle=True with sampler={type(sampler).__name__}: the sampler sets the order, "
            "so shuffle would be ignored. Drop shuffle=True (a sampler shuffles itself, e.g. "
            "DistributedSampler(ds, shuffle=True)), or drop sampler="
        )
