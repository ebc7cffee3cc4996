"""nebulae's Cockpit names over scramjet's core.

- :class:`Engine`: device choice; GPUs picked by free memory through NVML
  (:mod:`scramjet.runtime.devices`), read-only.
- :class:`TimeMachine`: checkpoint files named by ``file`` or folders of anchors through
  :class:`scramjet.checkpoint.CheckpointManager` (atomic writes, checksums, ``max_anchors``
  over all drops and across restarts, latest by sequence number).
- :class:`Multiverse`: N processes through :func:`scramjet.runtime.launch` (torch's
  elastic launcher, free port), the Trainer's model wrapping (:meth:`Trainer.wrap_model`:
  DDP), and :func:`scramjet.runtime.reduce`.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from scramjet.checkpoint import (
    CheckpointManager,
    CheckpointMismatchError,
    CorruptCheckpointError,
    LoadResult,
)
from scramjet.checkpoint.payload import (
    _FIT_ADVICE,
    MARKER,
    ChecksumMismatch,
    describe_skipped,
    load_module_state,
    to_storable,
    verify_file,
    write_checked,
)
from scramjet.compat.nebulae.astro import dock
from scramjet.compat.nebulae.kit import _check_least_mem
from scramjet.runtime import distributed as dist
from scramjet.runtime.devices import (
    NoGpuAvailableError,
    choose_gpus,
    query_gpus,
    set_visible_gpus,
)
from scramjet.runtime.files import atomic_write_text

__all__ = ["CPU", "GPU", "Engine", "Multiverse", "TimeMachine"]

CPU = "CPU"
GPU = "GPU"


class Engine:
    """Chooses the device a craft runs on (nebulae's ``Engine``).

    Args:
        device: ``"CPU"`` or ``"GPU"``.
        ngpus: Number of GPUs to take (``ngpu`` is accepted too, as in nebulae's examples);
            ignored with ``"CPU"``, as in nebulae.
        least_mem: Minimum free memory, in MiB, for a GPU to qualify.
        available_gpus: Restrict the choice to these GPU indices (default: all).

    With ``"GPU"`` the freest qualifying GPUs are read from NVML and, while CUDA is not
    initialised yet, made the only visible ones (``CUDA_VISIBLE_DEVICES``). Nothing is
    stopped or signalled: other processes on the GPUs are never touched. On a machine
    without a usable NVIDIA GPU it raises
    :class:`~scramjet.runtime.devices.NoGpuAvailableError` saying so.

    Attributes:
        device: The ``torch.device`` of this process (``cuda:<local rank>`` or ``cpu``).
        gpus: The chosen NVML indices (empty on CPU).
    """

    def __init__(
        self,
        device: str = CPU,
        ngpus: int = 1,
        least_mem: int = 2048,
        available_gpus: Sequence[int] = (),
        *,
        ngpu: int | None = None,
    ) -> None:
        kind = str(device).upper()
        if kind not in (CPU, GPU):
            raise ValueError(f"device must be 'CPU' or 'GPU'; received {device!r}.")
        wanted = ngpu if ngpu is not None else ngpus
        # As in nebulae, ngpus only counts with device='GPU': a CPU engine takes any value
        # (scripts pass torch.cuda.device_count(), which is 0 without a GPU).
        if kind == GPU and (isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 1):
            raise ValueError(f"ngpus must be an int >= 1 (GPUs to take); received {wanted!r}.")
        self.ngpus = wanted
        self.least_mem = int(_check_least_mem(least_mem))
        self.gpus: list[int] = []
        if kind == CPU:
            self.device = torch.device("cpu")
        else:
            self.device = self._take_gpus(list(available_gpus) or None)
        dock.set_current_device(self.device)

    def _take_gpus(self, available: list[int] | None) -> torch.device:
        self.gpus = self._choose(available)
        if not torch.cuda.is_initialized():
            set_visible_gpus(self.gpus)
        local_rank = dist.get_local_rank()
        return torch.device("cuda", local_rank % max(len(self.gpus), 1))

    def _choose(self, available: list[int] | None) -> list[int]:
        """The GPUs to take, or an error saying what was asked, what exists, what to do."""
        asked = f"Engine(device='GPU', ngpus={self.ngpus}, least_mem={self.least_mem}"
        asked += f", available_gpus={tuple(available)})" if available else ")"
        try:
            found = query_gpus()
        except ImportError as error:
            raise NoGpuAvailableError(
                f"{asked} reads the GPUs' free memory through NVML, whose Python package "
                "(nvidia-ml-py) is not installed. Install it with `pip install "
                "'scramjet[gpu]'`, or run on the CPU with Engine(device='CPU')."
            ) from error
        except RuntimeError as error:
            cause = error.__cause__ or error
            raise NoGpuAvailableError(
                f"{asked} asked for {self.ngpus} GPU(s), but this machine has no usable "
                f"NVIDIA GPU: the NVIDIA driver cannot be reached (NVML: {cause}). Run on the "
                "CPU with Engine(device='CPU'), or on a machine with an NVIDIA GPU and driver."
            ) from error
        fit = [
            g
            for g in found
            if g.free_mib >= self.least_mem and (available is None or g.index in available)
        ]
        if len(fit) < self.ngpus:
            listed = "; ".join(
                f"GPU {g.index} {g.name}: {g.free_mib}/{g.total_mib} MiB free" for g in found
            )
            raise NoGpuAvailableError(
                f"{asked} asked for {self.ngpus} GPU(s) with at least {self.least_mem} MiB "
                f"free, but {len(fit)} qualify. This machine has {len(found)} GPU(s)"
                f"{': ' + listed if listed else ''}. Lower ngpus or least_mem, list more "
                "GPUs in available_gpus, wait for memory to free up, or use "
                "Engine(device='CPU')."
            )
        return choose_gpus(fit, self.ngpus, self.least_mem)

    def __repr__(self) -> str:
        return f"Engine(device={str(self.device)!r}, gpus={self.gpus})"


class TimeMachine:
    """Saves and restores crafts (nebulae's ``TimeMachine``).

    Where :meth:`drop` writes, by ``file``:

    - a name with a suffix (``"epoch_3.pth"``, ``"best.pt"``, ``"sub/last.pth"``): that file,
      ``save_path/<file>`` (an absolute path is used as it is). It holds the craft's state
      dict, as nebulae's did: ``craft.load_state_dict(torch.load(path, weights_only=True))``
      works. Dropping the same name again replaces the file.
    - a name without a suffix (``"best"``), or ``""`` (the craft's ``scope``): a folder
      ``save_path/<name>/`` of anchors ``ckpt-<seq>-step<n>.pt``, one new file per drop,
      as :class:`scramjet.checkpoint.CheckpointManager` writes them. Sequence numbers are
      recovered from the folder, so after a restart new anchors never overwrite old ones,
      and :meth:`to` loads the latest by sequence number, never by modification time.

    Every file is written atomically (a temporary file, then a rename) with a checksum
    trailer, checked when :meth:`to` reads it. ``max_anchors`` bounds the number of
    checkpoint files kept over all drops of ``save_path``, named files and folders alike:
    after each drop the oldest are removed. The order of the drops is kept in
    ``save_path/.timemachine.json``, so the bound holds across restarts; files that no
    drop wrote (an earlier run without that list, your own files) are never removed.

    Args:
        ckpt_path: Folder checkpoints are read from.
        save_path: Folder checkpoints are written to.
        max_anchors: Number of checkpoint files kept in ``save_path`` (-1: keep all).
    """

    #: The list of anchors in the order they were dropped, inside ``save_path``.
    REGISTRY = ".timemachine.json"

    def __init__(
        self,
        ckpt_path: str | os.PathLike[str] = "",
        save_path: str | os.PathLike[str] = "",
        max_anchors: int = -1,
    ) -> None:
        if (
            isinstance(max_anchors, bool)
            or not isinstance(max_anchors, int)
            or (max_anchors == 0 or max_anchors < -1)
        ):
            raise ValueError(
                f"max_anchors must be -1 (keep all) or a positive int; received {max_anchors!r}."
            )
        self.ckpt_path = Path(ckpt_path) if str(ckpt_path) else None
        self.save_path = Path(save_path) if str(save_path) else None
        self.max_anchors = max_anchors

    @staticmethod
    def _name(craft: nn.Module, file: str | os.PathLike[str]) -> str:
        """``file``, else the craft's ``scope``, also through wrappers (DDP after
        ``mv.sync()``, DataParallel, an accelerated model), else its class name."""
        if str(file):
            return str(file)
        inner = _unwrap(craft)
        scope = getattr(craft, "scope", "") or getattr(inner, "scope", "")
        return str(scope or type(inner).__name__)

    def wait(self) -> None:
        """Nothing to wait for: :meth:`drop` returns once its file is written and synced."""

    def close(self) -> None:
        """Nothing to release: :meth:`drop` returns once its file is written and synced."""

    @staticmethod
    def _is_file_name(file: str | os.PathLike[str]) -> bool:
        """A ``file`` with a suffix names one checkpoint file; without one, a folder."""
        return bool(str(file)) and bool(Path(file).suffix)

    def drop(
        self, craft: nn.Module, file: str | os.PathLike[str] = "", save_scope: str | None = None
    ) -> Path | None:
        """Save ``craft`` (only its parameters under ``save_scope``, if given); rank 0 writes.

        Call it on every rank or on rank 0 only: it involves no collective operation.

        Args:
            craft: The model to save.
            file: A file name with a suffix (``"epoch_3.pth"``: that file, inside
                ``save_path`` unless absolute), or a folder name (default: the craft's
                ``scope``) that receives a new anchor file on every drop.
            save_scope: Only save parameters under this prefix.

        Returns:
            The path of the new checkpoint on rank 0; None on the other ranks.
        """
        if self.save_path is None:
            raise ValueError("TimeMachine(save_path=...) is needed to drop checkpoints.")
        model = _unwrap(craft)
        entry: Any = model
        if save_scope:
            prefix = save_scope.rstrip(".") + "."
            entry = {k: v for k, v in model.state_dict().items() if k.startswith(prefix)}
            if not entry:
                raise ValueError(
                    f"save_scope {save_scope!r} matches no parameter of {type(model).__name__}; "
                    f"top-level names: {sorted({k.split('.')[0] for k in model.state_dict()})}."
                )
        if not dist.is_main_process():
            return None  # no collective here: calling drop() on rank 0 only is fine too
        if self._is_file_name(file):
            path = self._drop_file(entry, self.save_path / file)
        else:
            path = self._drop_anchor(entry, self.save_path / self._name(craft, file))
        self._rotate(path)
        return path

    def _drop_file(self, entry: Any, path: Path) -> Path:
        if path.is_dir():
            raise IsADirectoryError(
                f"TimeMachine.drop(file={path.name!r}): {str(path)!r} is a folder (an earlier "
                "scramjet wrote a folder of anchors for every file name). Remove or rename "
                "it, or drop under another name."
            )
        state = entry.state_dict() if isinstance(entry, nn.Module) else entry
        # On the CPU, as safe values: torch.load(weights_only=True) reads it on any machine.
        cpu = {k: v.detach().cpu() if isinstance(v, torch.Tensor) else v for k, v in state.items()}
        storable = to_storable(cpu, "craft state")
        path.parent.mkdir(parents=True, exist_ok=True)
        write_checked(path, lambda f: torch.save(storable, f), fsync=True)
        return path

    def _drop_anchor(self, entry: Any, folder: Path) -> Path:
        keep = None if self.max_anchors == -1 else self.max_anchors
        manager = CheckpointManager(folder, keep_last=keep)
        found = manager.checkpoints()
        step = found[-1].step + 1 if found else 1
        path = manager.save({"model": entry}, step=step)
        # Rotation deletes old files in the background: finish it, so at most
        # max_anchors files are on disk when drop() returns.
        manager.wait()
        return path

    # ------------------------------------------------------------------ rotation
    def _key(self, path: Path) -> str:
        assert self.save_path is not None
        try:
            return path.relative_to(self.save_path).as_posix()
        except ValueError:  # an absolute file outside save_path
            return str(path.absolute())

    def _anchors(self) -> list[str]:
        """The anchors dropped into ``save_path`` that still exist, oldest first."""
        assert self.save_path is not None
        registry = self.save_path / self.REGISTRY
        try:
            listed = json.loads(registry.read_text(encoding="utf-8"))["anchors"]
        except FileNotFoundError:
            return []
        except (OSError, ValueError, KeyError, TypeError) as error:
            warnings.warn(
                f"TimeMachine: {str(registry)!r} cannot be read ({error}); the anchors it "
                "listed are kept, and max_anchors counts from the next drop on.",
                stacklevel=4,
            )
            return []
        anchors = [a for a in listed if isinstance(a, str)]
        return [a for a in anchors if (self.save_path / a).is_file()]

    def _rotate(self, path: Path) -> None:
        """Note the new anchor; remove the oldest ones beyond ``max_anchors``. A file
        dropped outside ``save_path`` (an absolute path, an export kept elsewhere) is not
        an anchor: rotation never deletes it."""
        assert self.save_path is not None
        key = self._key(path)
        inside = not Path(key).is_absolute()
        anchors = [a for a in self._anchors() if a != key and not Path(a).is_absolute()]
        anchors += [key] if inside else []
        if self.max_anchors != -1:
            while len(anchors) > self.max_anchors:
                (self.save_path / anchors.pop(0)).unlink(missing_ok=True)
        self.save_path.mkdir(parents=True, exist_ok=True)  # an absolute file went elsewhere
        atomic_write_text(
            self.save_path / self.REGISTRY, json.dumps({"anchors": anchors}, indent=1)
        )

    # ------------------------------------------------------------------ loading
    def to(
        self,
        craft: nn.Module,
        file: str | os.PathLike[str] = "",
        ckpt_scope: str | None = None,
        frozen: bool = False,
    ) -> LoadResult:
        """Load ``craft`` from ``ckpt_path``.

        Args:
            craft: The model to restore in place.
            file: A checkpoint file (absolute, or inside ``ckpt_path``): one that
                :meth:`drop` wrote, or a state dict saved with ``torch.save`` (nebulae's
                own files); or a folder name inside ``ckpt_path`` (its latest anchor);
                default the folder named after ``craft.scope``.
            ckpt_scope: Only load parameters under this prefix.
            frozen: True: every parameter must match (missing or unexpected keys raise).
                False: matching parameters are loaded, the rest reported and skipped.
        """
        if self.ckpt_path is None:
            raise ValueError("TimeMachine(ckpt_path=...) is needed to load checkpoints.")
        target = (
            Path(file)
            if file and Path(file).is_absolute()
            else self.ckpt_path / self._name(craft, file)
        )
        model = _unwrap(craft)
        if target.is_file():
            return _load_file(model, target, ckpt_scope, frozen)
        if target.is_dir():
            manager = CheckpointManager(target, keep_last=None)
            if manager.latest_path is None:
                raise FileNotFoundError(
                    f"no checkpoint in {str(target)!r}: the folder holds no anchor (a "
                    "TimeMachine with max_anchors removes the oldest files of save_path, "
                    "whatever their folder). Pass the file or folder that holds the "
                    "checkpoint as file=..., or raise max_anchors."
                )
            return _load_anchor(manager, model, "latest", ckpt_scope, frozen)
        raise FileNotFoundError(
            f"no checkpoint at {str(target)!r}: expected a checkpoint file or a folder "
            f"written by TimeMachine.drop(); check ckpt_path and file. "
            f"{_what_is_there(self.ckpt_path, target, None if file else target.name)}"
        )


def _what_is_there(folder: Path, target: Path, scope: str | None) -> str:
    """What ``folder`` holds that ``to()`` could load, and, for a craft's ``scope``,
    the newest ``<scope>-<n>.pth`` that nebulae's own ``drop()`` wrote."""
    if target.parent != folder or not folder.is_dir():
        folder = target.parent
    if not folder.is_dir():
        return f"The folder {str(folder)!r} does not exist."
    names = sorted(
        e.name + ("/" if e.is_dir() else "")
        for e in folder.iterdir()
        if not e.name.startswith(".") and (e.is_dir() or e.suffix in (".pth", ".pt", ".ckpt"))
    )
    if not names:
        return f"{str(folder)!r} holds no checkpoint file or folder."
    shown = ", ".join(names[:12]) + (f", ... ({len(names)} in all)" if len(names) > 12 else "")
    text = f"{str(folder)!r} holds: {shown}."
    numbered = [
        (int(n[len(scope) + 1 : -4]), n)
        for n in names
        if scope
        and n.startswith(scope + "-")
        and n.endswith(".pth")
        and n[len(scope) + 1 : -4].isdigit()
    ]
    if numbered:  # nebulae named its drops <scope>-<n>.pth, in save_path itself
        newest = max(numbered)[1]
        text += (
            f" nebulae's own drop() wrote {scope}-<n>.pth files: load the newest with "
            f"to(craft, file={newest!r})."
        )
    return text


def _unwrap(craft: Any) -> Any:
    """The craft inside its wrappers (``DistributedDataParallel``, ``DataParallel``, ...)."""
    seen = 0
    while isinstance(getattr(craft, "module", None), nn.Module) and seen < 8:
        craft, seen = craft.module, seen + 1
    return craft


_TO_ADVICE = (
    "Load it into the craft it was dropped from, or pass frozen=False to load the "
    "matching parameters only (or ckpt_scope='prefix' for one part)."
)


def _load_anchor(
    manager: CheckpointManager,
    model: nn.Module,
    which: str | Path,
    scope: str | None,
    strict: bool,
) -> LoadResult:
    """Load an anchor; a mismatch names ``to()``'s own arguments (``frozen``,
    ``ckpt_scope``), not the manager's ``strict`` and ``scope``."""
    try:
        return manager.load({"model": model}, which, strict=strict, scope=scope)
    except CheckpointMismatchError as error:
        text = str(error)
        if _FIT_ADVICE not in text:
            raise
        text = text.replace("entry 'model'", f"{type(model).__name__} (frozen=True)")
        raise CheckpointMismatchError(text.replace(_FIT_ADVICE, _TO_ADVICE)) from error


def _load_file(model: nn.Module, path: Path, scope: str | None, strict: bool) -> LoadResult:
    """Load one checkpoint file: a scramjet anchor, or a plain state dict."""
    try:
        verify_file(path)  # the checksum trailer, when the file has one
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except ChecksumMismatch as error:
        raise CorruptCheckpointError(path, str(error)) from error
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as error:
        raise CorruptCheckpointError(path, f"{type(error).__name__}: {error}") from error
    if isinstance(saved, Mapping) and MARKER in saved:  # an anchor of a folder
        manager = CheckpointManager(path.parent, keep_last=None)
        return _load_anchor(manager, model, path, scope, strict)
    if not isinstance(saved, Mapping) or not all(isinstance(k, str) for k in saved):
        raise CorruptCheckpointError(
            path, f"it holds a {type(saved).__name__}, not a state dict of the craft"
        )
    result = LoadResult(path=path, step=0, epoch=None, metrics={})
    skipped = load_module_state(
        "model",
        model,
        saved,
        scope,
        strict,
        path,
        target=f"{type(model).__name__} (frozen=True)",
        advice=_TO_ADVICE,
    )
    result.record_skipped("model", skipped)
    if not result.clean:
        warnings.warn(describe_skipped(result), stacklevel=3)
    return result


class _CraftDDP(nn.parallel.DistributedDataParallel):
    """``DistributedDataParallel`` that also answers with the craft's attributes.

    As after nebulae's ``mv.sync(net)``, ``net.scope``, ``net.fc`` or ``net.my_method()``
    reach the wrapped craft when the wrapper has no attribute of that name. Calling the
    wrapper (``net(x)``) still goes through DDP, which synchronises the gradients.
    """

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            inner = self.__dict__.get("_modules", {}).get("module")
            if inner is None:
                raise
            return getattr(inner, name)


class _AllReduceSum(torch.autograd.Function):
    """All-reduce (sum) whose backward all-reduces the incoming gradients (also a sum)."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor) -> torch.Tensor:
        out = tensor.detach().clone(memory_format=torch.contiguous_format)
        torch.distributed.all_reduce(out)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        total = grad.clone(memory_format=torch.contiguous_format)
        torch.distributed.all_reduce(total)
        return total


def _world_entry(universe: Callable[..., Any], nworld: int) -> Any:
    # Runs in each process started by scramjet.runtime.launch.
    return universe(Multiverse(universe, nworld))


class Multiverse:
    """Runs ``universe(mv)`` in ``nworld`` processes (nebulae's ``Multiverse``).

    Processes are started by :func:`scramjet.runtime.launch` (torch's elastic launcher,
    rendezvous on a free port); each one calls ``mv.init()`` to join the process group
    (gloo on CPU, NCCL on CUDA).

    Args:
        universe: A module-level function taking the Multiverse (it is pickled by
            reference when the processes start).
        nworld: Number of processes.
    """

    def __init__(self, universe: Callable[..., Any], nworld: int = 1) -> None:
        if isinstance(nworld, bool) or not isinstance(nworld, int) or nworld < 1:
            raise ValueError(f"nworld must be an int >= 1; received {nworld!r}.")
        if not callable(universe):
            raise TypeError(f"universe must be a function; received {type(universe).__name__}.")
        self.universe = universe
        self.nworld = nworld

    def __call__(self) -> Any:
        """Start the ``nworld`` processes and return rank 0's result."""
        from scramjet.runtime.launch import launch

        return launch(_world_entry, self.nworld, (self.universe, self.nworld))

    @property
    def rank(self) -> int:
        """This process's global rank."""
        return dist.get_rank()

    def init(self) -> Multiverse:
        """Join the process group (no-op in a single process)."""
        dist.init_distributed()
        return self

    def scope(self) -> contextlib.AbstractContextManager[None]:
        """A parallel scope. PyTorch needs none, so this is an empty context."""
        return contextlib.nullcontext()

    def sync(self, models: Any, data: Any = None) -> Any:
        """Wrap model(s) for data-parallel training and check the data is sharded.

        When more than one process runs, models with trainable parameters are wrapped as
        the Trainer wraps them (``runtime.wrap_data_parallel``: ``DistributedDataParallel``;
        nothing for an FSDP-sharded model), BatchNorm becoming SyncBatchNorm on CUDA. Each
        ``Tank`` in ``data`` (one Tank, or a list or tuple of them) must read its own share
        of the samples (its sampler spans as many processes as run), as a Tank created
        inside the Multiverse processes does. The Tanks are only checked, never read.

        Returns:
            Without ``data``: the wrapped model (or list of them). With ``data``, as in
            nebulae, one flat tuple of the models then the Tanks:
            ``net, train_tank, dev_tank = mv.sync(net, (train_tank, dev_tank))``.
        """
        many = isinstance(models, list | tuple)
        wrapped = [self._wrap(m) for m in (models if many else [models])]
        if data is None:
            return wrapped if many else wrapped[0]
        tanks = tuple(data) if isinstance(data, list | tuple) else (data,)
        for tank in tanks:
            self._check_data(tank)
        return (*wrapped, *tanks)

    @staticmethod
    def _wrap(model: nn.Module) -> nn.Module:
        if not isinstance(model, nn.Module):
            raise TypeError(f"sync() takes nn.Module crafts; received {type(model).__name__}.")
        if not dist.is_distributed() or not any(p.requires_grad for p in model.parameters()):
            return model
        device = next(model.parameters()).device
        if device.type == "cuda":
            model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        wrapped = dist.wrap_data_parallel(model, device)  # as the Trainer's wrap_model does
        if type(wrapped) is nn.parallel.DistributedDataParallel:
            wrapped.__class__ = _CraftDDP  # net.scope, net.fc, net.my_method() keep working
        return wrapped

    @staticmethod
    def _check_data(tank: Any) -> None:
        shares = getattr(getattr(tank, "sampler", None), "num_replicas", 1)
        if dist.is_distributed() and shares != dist.get_world_size():
            raise ValueError(
                f"sync(): {type(tank).__name__} does not shard its samples across the "
                f"{dist.get_world_size()} processes (its sampler spans {shares}). Create Tanks "
                "inside the Multiverse processes, after mv.init(), so each reads its own part."
            )

    def reduce(self, tensor: torch.Tensor | float, aggregate: bool = False) -> torch.Tensor:
        """Combine a value over all processes: the sum if ``aggregate`` else the mean.

        The result stays in the autograd graph, so ``mv.reduce(loss).backward()`` works.
        Its backward pass is an all-reduce too, so every process must call it (as DDP
        needs anyway). With the mean, each process then gets the gradient of its own
        loss, exactly as ``loss.backward()`` gives it; with the sum, ``nworld`` times it.
        In a single process the value is returned as it is (a differentiable copy).
        """
        value = torch.as_tensor(tensor)
        if not aggregate and not value.is_floating_point():
            value = value.double()  # the mean of integers is not an integer
        if not dist.is_distributed():
            return value.clone()
        # gloo reduces CPU tensors only; .to() is differentiable, so the graph is kept.
        gloo = torch.distributed.get_backend() == "gloo"
        work = value.to("cpu") if gloo and value.device.type != "cpu" else value
        summed: torch.Tensor = _AllReduceSum.apply(work)  # type: ignore[no-untyped-call]
        total = summed.to(value.device)
        return total if aggregate else total / dist.get_world_size()

    @staticmethod
    def Executor(fn: Callable[..., Any]) -> Callable[..., Any]:
        """Mark the main function of a run (returned unchanged, so it stays picklable)."""
        fn.__nebulae_executor__ = True  # type: ignore[attr-defined]
        return fn
