"""The values a checkpoint holds: :func:`to_storable` and :func:`from_storable`.

:func:`to_storable` rebuilds every container of a value (dict keys and set items
included) from the types that ``torch.load(weights_only=True)`` reads back, so nothing
else reaches ``torch.save``: a value that cannot be stored raises ``TypeError`` naming
where it is and how to convert it, before any file is written. Numpy arrays become
tagged tensors, numpy scalars their Python values, a frozenset a tagged list (the
loader refuses frozensets); :func:`from_storable` turns the tags back.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from scramjet.checkpoint._values import short

__all__ = ["from_storable", "to_storable"]

_NDARRAY_TAG = "__scramjet_ndarray__"
_FROZENSET_TAG = "__scramjet_frozenset__"
_PRIMITIVES: tuple[type, ...] = (bool, int, float, complex, str, bytes)
_KEY_ADVICE = (
    "Dict keys and set items must be str, int, float, bool, complex, bytes, None, a torch "
    "dtype, device or tensor, or tuples of these; convert them first (e.g. {str(k): v for k, v in "
    "d.items()}, or tuple(sorted(s)) for a frozenset)."
)


def to_storable(value: Any, where: str) -> Any:
    """Convert ``value`` into types that ``torch.load(weights_only=True)`` accepts.

    Raises:
        TypeError: ``value`` holds something a checkpoint cannot hold; the message names
            its place (``where`` and the keys below it) and how to convert it.
    """
    if value is None or type(value) in _PRIMITIVES:
        return value
    if isinstance(value, np.generic):  # before float: np.float64 subclasses float
        return _numpy_scalar(value, where)
    if isinstance(value, _PRIMITIVES):  # IntEnum, StrEnum, str subclasses: the plain value
        return _plain(value)
    if isinstance(value, torch.Tensor):
        return _loadable_tensor(value, where)
    if isinstance(value, torch.dtype | torch.device):
        return value
    if isinstance(value, np.ndarray):
        return {_NDARRAY_TAG: _array_tensor(value, where)}
    if isinstance(value, Mapping):
        return _storable_dict(value, where)
    if isinstance(value, list | tuple):
        items = [to_storable(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, tuple) and not hasattr(value, "_fields"):
            return tuple(items)
        return items  # a list, or a named tuple (whose class the loader refuses)
    if isinstance(value, set | frozenset):
        stored = _storable_set(value, where)
        return {_FROZENSET_TAG: list(stored)} if isinstance(value, frozenset) else stored
    raise TypeError(_unstorable(value, where))


def _plain(value: Any) -> Any:
    """The plain ``bool``/``int``/.../``bytes`` value of an instance of a subclass."""
    for base in _PRIMITIVES:
        if isinstance(value, base):
            # str() of a (str, Enum) member is "Class.NAME"; str.__str__ gives its value
            return str.__str__(value) if base is str else base(value)
    raise AssertionError(f"not a subclass of a primitive type: {type(value)!r}")


def _numpy_scalar(value: np.generic, where: str) -> Any:
    if isinstance(value, np.datetime64 | np.timedelta64):
        # .item() gives a datetime.date, a datetime.timedelta or an int depending on the
        # unit: the loader refuses the first two and the last silently loses the unit.
        kind = type(value).__name__
        raise TypeError(
            f"{where}: cannot store a numpy {kind} scalar ({value!r}). Store str(value) and "
            f"rebuild it with np.{kind}(text) after loading, or store value.astype('int64') "
            f"(a count of its unit, {np.datetime_data(value.dtype)[0]!r})."
        )
    item = value.item()
    if isinstance(item, np.generic):  # longdouble, clongdouble: no Python equivalent
        raise TypeError(
            f"{where}: cannot store a numpy {value.dtype} scalar ({short(value)}): it has no "
            "Python equivalent. Store float(value) (or complex(value)), or str(value) to "
            "keep every digit."
        )
    return to_storable(item, where)


def _loadable_tensor(value: torch.Tensor, where: str) -> torch.Tensor:
    """``value`` if the loader rebuilds its class: torch's own, or one registered with
    ``torch.serialization.add_safe_globals``."""
    cls = type(value)
    if cls is torch.Tensor or cls is nn.Parameter or cls.__module__.split(".")[0] == "torch":
        return value
    get = getattr(torch.serialization, "get_safe_globals", None)
    registered = get() if get is not None else []
    if cls in {entry[0] if isinstance(entry, tuple) else entry for entry in registered}:
        return value
    raise TypeError(
        f"{where}: cannot store a tensor of the subclass {cls.__module__}.{cls.__qualname__}: "
        "torch.load(weights_only=True) rebuilds only torch's tensor classes and those "
        "registered with torch.serialization.add_safe_globals. Store "
        "value.as_subclass(torch.Tensor), or register the class with "
        "torch.serialization.add_safe_globals([...]) in the processes that save and load."
    )


def _storable_key(key: Any, where: str) -> Any:
    """``key`` (a dict key or set item) as a type the loader rebuilds, still hashable."""
    if key is None or type(key) in _PRIMITIVES or isinstance(key, torch.dtype | torch.device):
        return key
    if isinstance(key, tuple):  # named tuples too: the loader refuses their class
        return tuple(_storable_key(part, where) for part in key)
    if isinstance(key, torch.Tensor):  # hashed by identity; the loader rebuilds it
        return _loadable_tensor(key, f"{where} (a key)")
    if isinstance(key, (np.generic, enum.Enum, *_PRIMITIVES)):
        return to_storable(key, f"{where} (a key)")
    raise TypeError(
        f"{where}: cannot store the key {short(key)} of type {type(key).__qualname__}. "
        f"{_KEY_ADVICE}"
    )


def _storable_dict(value: Mapping[Any, Any], where: str) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    originals: dict[Any, Any] = {}
    for key, item in value.items():
        stored = _storable_key(key, where)
        if stored in out:
            raise TypeError(
                f"{where}: the keys {short(originals[stored])} and {short(key)} are both "
                f"stored as {short(stored)}, so one value would be lost; give them distinct "
                "keys (of one type) before saving"
            )
        originals[stored] = key
        out[stored] = to_storable(item, f"{where}[{key!r}]")
    return out


def _storable_set(value: set[Any] | frozenset[Any], where: str) -> set[Any]:
    stored = {_storable_key(item, f"{where} (a {type(value).__name__})") for item in value}
    if len(stored) < len(value):
        raise TypeError(
            f"{where}: {len(value) - len(stored)} item(s) of this {type(value).__name__} "
            "would be merged with others once stored as plain Python values; give them "
            "distinct values (of one type) before saving"
        )
    return stored


def _unstorable(value: Any, where: str) -> str:
    """Why ``value`` cannot be stored and how to convert it."""
    if isinstance(value, enum.Enum):
        cls = type(value).__qualname__
        return (
            f"{where}: cannot store the enum member {short(value)}: torch.load("
            f"weights_only=True) does not rebuild {cls} objects. Store its value "
            f"({short(value.value)}) or its name ({value.name!r}) and rebuild it with "
            f"{cls}(value) or {cls}[name] after loading."
        )
    return (
        f"{where}: cannot store a value of type {type(value).__qualname__}. Expected an object "
        "with state_dict()/load_state_dict(), a tensor, a numpy array, a number, a string, "
        "or lists/tuples/sets/dicts of these. Convert it (e.g. to a dict) before saving."
    )


def _array_tensor(value: np.ndarray[Any, Any], where: str) -> torch.Tensor:
    """A tensor holding ``value`` with its shape (0-d included) and values; a byte order
    other than the machine's is converted (the values stay the same)."""
    if value.dtype == object:
        raise TypeError(
            f"{where}: numpy arrays of dtype=object cannot be stored safely; "
            "convert it to a numeric array or a list first"
        )
    # C order, native byte order, writable (torch warns about read-only memory); np.require
    # copies only when needed and, unlike np.ascontiguousarray, keeps a 0-d array 0-d.
    array = np.require(value, value.dtype.newbyteorder("="), requirements=["C", "W"])
    try:
        return torch.from_numpy(array)
    except TypeError:
        raise TypeError(
            f"{where}: a numpy array of dtype {value.dtype} cannot be stored as a tensor "
            "(torch has bool, integer, float and complex dtypes only); convert it to a "
            "numeric array (e.g. .astype('int64') for datetimes) or to a list with "
            ".tolist() first"
        ) from None


def from_storable(
    value: Any, copy: bool = False, _memo: dict[tuple[str, int, int], Any] | None = None
) -> Any:
    """Undo :func:`to_storable`; ``copy`` copies tensors (to detach them from a mmap),
    each storage once, so expanded tensors and views keep the layout ``torch.load`` gives."""
    memo = {} if _memo is None else _memo
    if isinstance(value, torch.Tensor):
        return _copy_storage_once(value, memo) if copy else value
    if isinstance(value, dict):
        if len(value) == 1 and _NDARRAY_TAG in value:
            return from_storable(value[_NDARRAY_TAG], copy, memo).numpy()
        if len(value) == 1 and isinstance(value.get(_FROZENSET_TAG), list):
            return frozenset(value[_FROZENSET_TAG])  # items are hashable plain values
        return {k: from_storable(v, copy, memo) for k, v in value.items()}
    if isinstance(value, list):
        return [from_storable(v, copy, memo) for v in value]
    if isinstance(value, tuple):
        return tuple(from_storable(v, copy, memo) for v in value)
    return value


def _copy_storage_once(tensor: torch.Tensor, memo: dict[tuple[str, int, int], Any]) -> Any:
    """``tensor`` over a copy of its storage (one copy per storage, kept in ``memo``): a
    clone would turn a stride-0 tensor of 4 bytes into one element per index."""
    plain = type(tensor) is torch.Tensor and tensor.layout == torch.strided
    if not plain or tensor.is_quantized or tensor.is_conj() or tensor.is_neg():
        # detached: a clone of a tensor that requires grad would carry a CloneBackward
        copied = tensor.detach().clone()
        if isinstance(tensor, torch.nn.Parameter):  # stays a Parameter, a leaf
            return torch.nn.Parameter(copied, requires_grad=tensor.requires_grad)
        return copied.requires_grad_(tensor.requires_grad) if tensor.requires_grad else copied
    source = tensor.untyped_storage()
    key = (str(tensor.device), source.data_ptr(), source.nbytes())
    if key not in memo:
        memo[key] = source.clone()
    out = torch.empty(0, dtype=tensor.dtype, device=tensor.device)
    out.set_(memo[key], tensor.storage_offset(), tensor.size(), tensor.stride())
    return out.requires_grad_(tensor.requires_grad)
