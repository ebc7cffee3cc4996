"""``trainer._accelerator``: what pytorch-accelerated code reads from its Accelerator.

The peer's Trainer held an ``accelerate.Accelerator`` as ``_accelerator``, and code written
for it (its own callbacks included) calls ``trainer._accelerator.unwrap_model(...)``,
``.is_local_main_process``, ``.wait_for_everyone()``, ``.backward(loss)``... scramjet
has no Accelerator: this view answers those names from the Trainer and
:mod:`scramjet.runtime.distributed`, and names what it offers for any other.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from scramjet.checkpoint.payload import unwrap
from scramjet.runtime import distributed as dist

if TYPE_CHECKING:
    from scramjet.compat.pytorch_accelerated.trainer import Trainer

OFFERED = (
    "device", "is_main_process", "is_local_main_process", "num_processes", "process_index",
    "local_process_index", "mixed_precision", "use_distributed", "unwrap_model",
    "wait_for_everyone", "print", "gather", "backward", "clip_grad_norm_", "clip_grad_value_",
    "save", "no_sync",
)  # fmt: skip


class AcceleratorView:
    """The Accelerator attributes and methods pytorch-accelerated code uses, for one Trainer."""

    def __init__(self, trainer: Trainer) -> None:
        self._trainer = trainer

    @property
    def device(self) -> torch.device:
        """The Trainer's device."""
        return self._trainer.device

    @property
    def is_main_process(self) -> bool:
        """True on the process of global rank 0."""
        return dist.is_main_process()

    @property
    def is_local_main_process(self) -> bool:
        """True on the first process of each machine."""
        return dist.get_local_rank() == 0

    @property
    def num_processes(self) -> int:
        """Number of processes taking part."""
        return dist.get_world_size()

    @property
    def process_index(self) -> int:
        """This process's global rank."""
        return dist.get_rank()

    @property
    def local_process_index(self) -> int:
        """This process's rank on its machine."""
        return dist.get_local_rank()

    @property
    def mixed_precision(self) -> str:
        """``"no"``, ``"fp16"`` or ``"bf16"``."""
        return str(self._trainer.precision)

    @property
    def use_distributed(self) -> bool:
        """Whether more than one process runs."""
        return dist.get_world_size() > 1

    def unwrap_model(self, model: nn.Module, keep_torch_compile: bool = True) -> nn.Module:
        """``model`` without its DDP wrapper (and without ``torch.compile``'s if asked)."""
        if model is self._trainer.model:
            return self._trainer.get_model(keep_torch_compile)
        if isinstance(model, nn.parallel.DistributedDataParallel | nn.DataParallel):
            model = model.module
        return model if keep_torch_compile else unwrap(model)

    def wait_for_everyone(self) -> None:
        """Block until every process reaches this point."""
        dist.barrier()

    def print(self, *args: Any, **kwargs: Any) -> None:
        """``print`` on the main process only."""
        self._trainer.print(*args, **kwargs)

    def gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` from every process, concatenated along dim 0 in rank order."""
        return dist.gather(tensor)

    def backward(self, loss: torch.Tensor, **kwargs: Any) -> None:
        """Backpropagate ``loss``, scaled by the Trainer's GradScaler when fp16 uses one."""
        scaler = self._trainer.scaler
        (scaler.scale(loss) if scaler is not None else loss).backward(**kwargs)

    def _unscale(self) -> None:
        scaler = self._trainer.scaler
        if scaler is not None:
            with contextlib.suppress(RuntimeError):  # already unscaled in this update
                scaler.unscale_(self._trainer.optimizer)

    def clip_grad_norm_(
        self, parameters: Iterable[torch.Tensor], max_norm: float, norm_type: float = 2.0
    ) -> torch.Tensor:
        """Clip the gradients' total norm (after unscaling fp16 gradients); returns the norm."""
        self._unscale()
        return nn.utils.clip_grad_norm_(list(parameters), max_norm, norm_type=norm_type)

    def clip_grad_value_(self, parameters: Iterable[torch.Tensor], clip_value: float) -> None:
        """Clip each gradient to ``[-clip_value, clip_value]`` (after unscaling fp16 gradients)."""
        self._unscale()
        nn.utils.clip_grad_value_(list(parameters), clip_value)

    def save(self, obj: Any, f: str | os.PathLike[str]) -> None:
        """``torch.save(obj, f)`` on the main process only."""
        if dist.is_main_process():
            torch.save(obj, f)

    def no_sync(self, model: nn.Module) -> contextlib.AbstractContextManager[Any]:
        """DDP's ``no_sync()`` for a wrapped model; nothing to do otherwise."""
        if isinstance(model, nn.parallel.DistributedDataParallel):
            return model.no_sync()
        return contextlib.nullcontext()

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"trainer._accelerator is scramjet's stand-in for pytorch-accelerated's "
            f"accelerate.Accelerator, and has no attribute {name!r}. It offers: "
            f"{', '.join(OFFERED)}. For anything else use the Trainer itself (trainer.device, "
            f"trainer.get_model(), trainer.gather(...), trainer.precision) or "
            f"scramjet.runtime.distributed."
        )
