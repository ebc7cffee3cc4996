"""What the loggers are told about a run: its meaningful settings and where it came from."""

from __future__ import annotations

import argparse
import dataclasses
import enum
import getpass
import math
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from scramjet.tracking._files import git_commit, launch_script
from scramjet.tracking.loggers.base import flatten_params, param_value

if TYPE_CHECKING:
    from scramjet.trainer import Trainer

#: Optimizer settings worth comparing runs by (those the optimizer has).
_OPTIMIZER_KEYS = ("lr", "momentum", "betas", "weight_decay")


#: Arrays and tensors up to this many elements are recorded as lists, larger ones described.
_MAX_LISTED = 64


def plain_hyperparams(params: Any) -> dict[str, Any]:
    """The user's hyperparameters as JSON values, taken when the Experiment is built.

    ``params`` is a mapping, or a settings object with named fields: a dataclass (such as
    Hugging Face ``TrainingArguments``), an object with a ``to_dict()`` (a Hugging Face
    ``PretrainedConfig``), an ``argparse.Namespace`` or ``types.SimpleNamespace``, a
    ``NamedTuple``, a pydantic model or an attrs class. Keys become strings (``{3: ...}``
    beside string keys could not be written sorted); nested settings objects become dicts
    of their fields (so ``cfg.lr`` reaches the loggers as its own name); one-element tensors
    and NumPy scalars their number; small tensors and arrays lists; paths, dtypes and
    devices strings; lists, tuples and other sequences (OmegaConf's ``ListConfig``) lists;
    sets sorted lists; anything else its ``str``.

    Two values that would share one name are refused with a ``ValueError`` naming both
    (see :func:`check_flat_names`), and so are values that contain themselves, before
    anything is written.
    """
    fields = _fields_of(params)
    if fields is None:
        raise TypeError(
            f"hyperparams must be a mapping of names to values, or a settings object with "
            f"named fields (a dataclass, an argparse.Namespace or SimpleNamespace, a "
            f"NamedTuple, a pydantic model, an attrs class, an object with to_dict()); "
            f"received {type(params).__name__}. Pass a dict, e.g. hyperparams={{'lr': 1e-3}}."
        )
    try:
        plain = _plain_fields(fields, ())
    except RecursionError:  # a cycle: a dict or list in itself, a parent pointer
        raise ValueError(
            "hyperparams contains itself: a dict, list or settings object holds itself "
            "somewhere inside (a parent pointer, say), so it cannot be written as JSON "
            "(or it nests deeper than Python's recursion limit). Pass the plain values "
            "that define the run, e.g. hyperparams={'lr': cfg.lr, 'model': cfg.model.name}. "
            "Nothing was written."
        ) from None
    check_flat_names(plain)
    return plain


def _plain_fields(fields: Mapping[Any, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """``fields`` with string keys and JSON values; two keys written alike (``1`` and
    ``"1"``) are refused, as one would silently replace the other."""
    out: dict[str, Any] = {}
    first: dict[str, Any] = {}
    for key, value in fields.items():
        name = str(key)
        if name in out:
            where = f" of {_path_text(path)}" if path else ""
            raise ValueError(
                f"hyperparams: the keys {first[name]!r} and {key!r}{where} are both written "
                f"as {name!r} (hyperparams.json and the loggers name hyperparameters by "
                f"text), so one value would hide the other; every key must be distinct as "
                f"text. Rename one of them. Nothing was written."
            )
        first[name] = key
        out[name] = _plain_value(value, (*path, name))
    return out


def _path_text(path: Sequence[str]) -> str:
    """``['optim']['lr']``: where a value sits in the hyperparameters."""
    return "".join(f"[{key!r}]" for key in path)


def _leaf_paths(values: Mapping[str, Any], path: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The key path of every value that is not a non-empty mapping."""
    found: list[tuple[str, ...]] = []
    for key, value in values.items():
        if isinstance(value, Mapping) and value:
            found += _leaf_paths(value, (*path, key))
        else:
            found.append((*path, key))
    return found


def check_flat_names(values: Mapping[str, Any]) -> None:
    """Refuse hyperparameters whose flattened names collide.

    Nested names are joined with ``.`` for the loggers (MLflow params, TensorBoard's
    HParams, the W&B config), ``scramjet runs`` and ``list_runs``; a key that holds a dot
    can then name the same thing as a nested one (``{"a.b": 1, "a": {"b": 2}}`` gives
    ``a.b`` twice), and one value would hide the other there. Raises ``ValueError``
    naming each collision and how to rename.
    """
    by_name: dict[str, list[tuple[str, ...]]] = {}
    for path in _leaf_paths(values, ()):
        by_name.setdefault(".".join(path), []).append(path)
    clashes = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    if not clashes:
        return
    said = "; ".join(
        " and ".join(_path_text(p) for p in paths)
        + f" {'both' if len(paths) == 2 else 'all'} flatten to {name!r}"
        for name, paths in sorted(clashes.items())
    )
    dotted = next(p for paths in clashes.values() for p in paths if any("." in k for k in p))
    renamed = [k.replace(".", "_") for k in dotted]
    raise ValueError(
        f"hyperparams: {said}. Nested names are joined with '.' for the loggers, "
        f"`scramjet runs` and list_runs, so one value would hide the other; every "
        f"flattened name must be unique. Rename one of them, e.g. {_path_text(dotted)} as "
        f"{_path_text(renamed)}, or keep the value in one place only. Nothing was written."
    )


def _fields_of(value: Any) -> Mapping[Any, Any] | None:
    """The named fields of a mapping or a settings object; ``None`` for anything else."""
    if isinstance(value, Mapping):
        return value
    if isinstance(value, type):
        return None
    to_dict = getattr(value, "to_dict", None)  # the object's own account of its settings
    if callable(to_dict):
        as_dict = to_dict()
        if isinstance(as_dict, Mapping):
            return as_dict
    if dataclasses.is_dataclass(value):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, argparse.Namespace | types.SimpleNamespace):
        return vars(value)
    as_fields = getattr(value, "_asdict", None)
    if isinstance(value, tuple) and callable(as_fields):
        return dict(as_fields())  # a NamedTuple: its field names, not a bare list
    model_dump = getattr(value, "model_dump", None)  # a pydantic model
    if callable(model_dump):
        as_dict = model_dump()
        if isinstance(as_dict, Mapping):
            return as_dict
    attributes = getattr(type(value), "__attrs_attrs__", None)  # an attrs class
    if attributes is not None:
        return {a.name: getattr(value, a.name) for a in attributes}
    return None


def _plain_value(value: Any, path: tuple[str, ...] = ()) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, enum.Enum):
        return _plain_value(value.value, path)
    if _numel(value) is None:
        fields = _fields_of(value)
        if fields is not None:
            return _plain_fields(fields, path)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [_plain_value(v, path) for v in value]  # lists, tuples, OmegaConf's ListConfig
    if isinstance(value, set | frozenset):
        items = [_plain_value(v) for v in value]
        return sorted(items, key=lambda v: (type(v).__name__, str(v)))
    numel = _numel(value)  # torch tensors and NumPy arrays / scalars
    if numel is not None:
        if numel == 1:
            return _plain_value(_as_written(value.reshape(-1)[0]))
        if numel <= _MAX_LISTED:
            return _plain_value(_as_written(value))
        dtype = str(getattr(value, "dtype", "")).replace("torch.", "")
        return f"{type(value).__name__}(shape={list(value.shape)}, dtype={dtype})"
    return str(value)


def _as_written(value: Any) -> Any:
    """``value.tolist()``, each float of a float16, bfloat16 or float32 tensor or array as
    the shortest decimal that reads back as the same value in that precision:
    ``np.float32(0.1)`` is 0.1, not 0.10000000149011612 (its float32 value in double
    precision), so it equals the ``0.1`` of another run."""
    dtype = getattr(value, "dtype", None)
    if isinstance(dtype, torch.dtype):
        if not dtype.is_floating_point or dtype.itemsize >= 8:
            return value.tolist()
        if dtype in (torch.float16, torch.float32):
            host = value.detach()  # one copy to the host, none for a tensor already there
            return _shortest((host if host.device.type == "cpu" else host.cpu()).numpy())
        narrow = lambda v: torch.tensor(v, dtype=dtype).item()  # noqa: E731
        return _map_floats(value.tolist(), narrow)  # bfloat16: no NumPy type
    if getattr(dtype, "kind", "") != "f" or getattr(dtype, "itemsize", 8) >= 8:
        return value.tolist()
    if getattr(dtype, "itemsize", 8) in (2, 4):
        return _shortest(np.asarray(value))
    return _map_floats(value.tolist(), lambda v: dtype.type(v).item())  # type: ignore[union-attr]


def _shortest(array: np.ndarray[Any, Any]) -> Any:
    """A float16 or float32 array as nested lists (a float for a scalar) of the shortest
    decimals NumPy writes for them (about 2 µs a value: predictions may be large)."""
    flat = [float(str(v)) for v in array.ravel()]
    return np.array(flat, dtype=np.float64).reshape(array.shape).tolist()


def _map_floats(plain: Any, narrow: Callable[[float], float]) -> Any:
    """``plain`` (a float or nested lists of floats) with each finite float replaced by its
    shortest decimal that ``narrow`` (a cast to the value's precision) maps back to it."""
    if isinstance(plain, list):
        return [_map_floats(v, narrow) for v in plain]
    if not isinstance(plain, float) or not math.isfinite(plain):
        return plain
    for digits in range(1, 18):
        short = float(f"{plain:.{digits}g}")
        if narrow(short) == plain:
            return short
    return plain


def _numel(value: Any) -> int | None:
    """The element count of a tensor or array (``None`` for anything else)."""
    shape = getattr(value, "shape", None)
    if shape is None or not hasattr(value, "tolist") or not hasattr(value, "reshape"):
        return None
    try:
        return math.prod(int(n) for n in shape)
    except (TypeError, ValueError):
        return None


def tracker_params(trainer: Trainer, hyperparams: Mapping[str, Any]) -> dict[str, Any]:
    """The user's hyperparameters (flattened, their names kept) and the trainer's settings
    that change results: optimizer class and its lr/momentum/betas/weight decay, scheduler,
    batch size, accumulation, precision, epochs and world size. A user's name wins over
    the trainer's."""
    opt = trainer.optimizer
    params: dict[str, Any] = {"optimizer": type(opt).__name__}
    settings = optimizer_settings(opt)
    for key in _OPTIMIZER_KEYS:
        if key in settings:
            params[f"optimizer.{key}"] = settings[key]
    scheduler = trainer.scheduler
    params["scheduler"] = type(scheduler).__name__ if scheduler is not None else "none"
    if trainer.has_run_config:
        config = trainer.run_config
        params.update(
            batch_size=config.train_per_device_batch_size,
            gradient_accumulation_steps=config.gradient_accumulation_steps,
            precision=config.precision,
            num_epochs=config.num_epochs,
            world_size=config.num_processes,
        )
    params.update(flatten_params(hyperparams))
    return {k: param_value(v) for k, v in params.items()}


def source_tags() -> dict[str, str]:
    """MLflow's standard source tags: the launching script, the git commit and the user."""
    script = launch_script()
    tags = {
        "mlflow.source.name": str(script) if script else (sys.argv[0] or "python"),
        "mlflow.source.type": "LOCAL",
        "mlflow.user": _user(),
    }
    commit = git_commit(script.parent if script else None)
    if commit:
        tags["mlflow.source.git.commit"] = commit
    return tags


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name (some containers)
        return "unknown"


def optimizer_settings(opt: Any) -> dict[str, Any]:
    """The optimizer's plain settings as its parameter groups use them: one value where
    every group agrees, else ``{"per_group": [...]}`` (weight decay left out of norms and
    biases); the learning rate as given, before a scheduler moved it (``initial_lr``)."""
    out: dict[str, Any] = {}
    for key, default in opt.defaults.items():
        start = "initial_lr" if key == "lr" else key
        values = [plain_setting(g.get(start, g.get(key, default))) for g in opt.param_groups]
        if values and all(v is not None for v in values):
            same = all(v == values[0] or _both_nan(v, values[0]) for v in values)
            out[key] = values[0] if same else {"per_group": values}
    return out


def _both_nan(a: Any, b: Any) -> bool:
    """NaN settings agree with each other (``nan == nan`` is False): one group's NaN
    learning rate is one value, not ``{"per_group": [NaN]}``."""
    return isinstance(a, float) and isinstance(b, float) and a != a and b != b


def plain_setting(value: Any) -> Any:
    """A plain number, string or flag, or a tuple of numbers (``betas``) as a list; else None."""
    if isinstance(value, int | float | str | bool):
        return value
    if isinstance(value, tuple | list) and all(isinstance(v, int | float) for v in value):
        return list(value)
    return None


def scheduler_settings(scheduler: Any) -> dict[str, Any] | None:
    """The scheduler's class and its plain settings (``None`` without a scheduler)."""
    if scheduler is None:
        return None
    found = {"class": type(scheduler).__name__}
    for key, value in sorted(vars(scheduler).items()):
        plain = plain_setting(value)
        if not key.startswith("_") and key != "last_epoch" and plain is not None:
            found[key] = plain
    return found


def plain_results(value: Any) -> Any:
    """Results and predictions as JSON values: tensors and arrays lists, keys strings; the
    floats of float16/bfloat16/float32 ones as the shortest decimal of their precision
    (``0.3``, not ``0.30000001192092896``), float64 ones with every digit."""
    if isinstance(value, torch.Tensor) or (
        hasattr(value, "tolist") and hasattr(value, "dtype") and not isinstance(value, str)
    ):
        return _as_written(value)
    if hasattr(value, "tolist") and not isinstance(value, str):
        return value.tolist()
    if isinstance(value, Mapping):
        return {str(k): plain_results(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_results(v) for v in value]
    return value


def results_mapping(results: Any) -> Mapping[str, Any]:
    """What ``Experiment.log_results`` writes: a ``{metric: value}`` mapping, or the results
    of an AIToolbox result package (``get_results()``).

    Raises:
        TypeError: anything else (a scramjet result package object, whose text would have
            been written in place of its numbers).
    """
    if isinstance(results, Mapping):
        return results
    get = getattr(results, "get_results", None)
    if callable(get) and isinstance(got := get(), Mapping):
        return got
    raise TypeError(
        f"log_results(name, results): results must be a dict {{metric: value}}; received "
        f"{type(results).__name__}. For a scramjet result package pass what it returns: "
        f"results.evaluate(trainer, data) or results(y_pred, y_true); for an AIToolbox "
        f"one, prepare it first (prepare_result_package) and pass it or its get_results()."
    )


def result_numbers(results: Any) -> dict[str, float]:
    """The numbers of a result package, nested names joined with ``/``."""
    out: dict[str, float] = {}
    if not isinstance(results, Mapping):
        return out
    for key, value in results.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            out[str(key)] = float(value)
        elif isinstance(value, Mapping):
            out.update({f"{key}/{k}": v for k, v in result_numbers(value).items()})
    return out


CHECKPOINT_CHOICES = "'epoch', 'end', an int N (every N optimizer steps) or None"


def check_options(checkpoint: Any, mode: str, every: int, on_storage_error: str) -> None:
    """Refuse ``Experiment`` options it cannot act on, saying what it accepts."""
    ok = checkpoint in ("epoch", "end", None) or (
        isinstance(checkpoint, int) and not isinstance(checkpoint, bool) and checkpoint > 0
    )
    if not ok:
        raise ValueError(f"checkpoint must be {CHECKPOINT_CHOICES}; received {checkpoint!r}.")
    if mode not in ("min", "max"):
        raise ValueError(f"mode must be 'min' or 'max'; received {mode!r}.")
    if not isinstance(every, int) or every < 1:
        raise ValueError(f"log_every_n_steps must be an int ≥ 1; received {every!r}.")
    if on_storage_error not in ("raise", "local", "continue"):
        raise ValueError(
            f"on_storage_error must be 'raise', 'local' or 'continue'; received "
            f"{on_storage_error!r}."
        )


def declared_hyperparams(
    project: str, experiment: str, run: str, hyperparams: Mapping[str, Any]
) -> dict[str, Any]:
    """``hyperparams.json`` of a run without a Trainer: the run's names and the user's values."""
    return {"project": project, "experiment": experiment, "run": run, "hyperparams": hyperparams}


def run_hyperparams(
    trainer: Trainer, project: str, experiment: str, run: str, hyperparams: Mapping[str, Any]
) -> dict[str, Any]:
    """``hyperparams.json``: the user's values and what the Trainer runs with."""
    opt = trainer.optimizer
    model = trainer.unwrapped_model
    return {
        **declared_hyperparams(project, experiment, run, hyperparams),
        "trainer": trainer.run_config.to_dict() if trainer.has_run_config else {},
        "optimizer": {"class": type(opt).__name__, **optimizer_settings(opt)},
        "scheduler": scheduler_settings(trainer.scheduler),
        "model": {
            "class": type(model).__name__,
            "parameters": sum(p.numel() for p in model.parameters()),
        },
    }
