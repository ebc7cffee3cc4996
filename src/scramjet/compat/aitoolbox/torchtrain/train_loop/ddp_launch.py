"""``TrainLoop(gpu_mode="ddp")``: join a launcher's processes, or start them through scramjet's launcher.

Under ``torchrun`` / ``scramjet launch`` (``WORLD_SIZE`` > 1) every process runs the
Trainer, which creates the process group and wraps the model in DistributedDataParallel.
Started from a plain ``python script.py``, ``fit`` starts one process per visible GPU
(NCCL), or two on CPU (gloo), with :func:`scramjet.runtime.launch` (torch elastic, a free
port chosen by the OS), trains in them, and copies rank 0's trained weights, history and
counters back into this process's TrainLoop. The model, loaders, optimizer and callbacks
are sent to the processes by pickling, so they must be importable (defined in a module).
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import torch

from scramjet.runtime import distributed as dist

if TYPE_CHECKING:
    from scramjet.compat.aitoolbox.torchtrain.train_loop.train_loop import TrainLoop

__all__ = ["train_ddp"]


def _under_launcher() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def train_ddp(
    loop: TrainLoop,
    num_epochs: int,
    num_iterations: int,
    callbacks: Iterable[Any] | None = None,
    grad_accumulation: int = 1,
    ddp_model_args: Any = None,
    in_process_data_load: Any = None,
    num_nodes: int = 1,
    node_rank: int = 0,
    num_gpus: int | None = None,
    **kwargs: Any,
) -> Any:
    """Train ``loop`` with DistributedDataParallel and return its (trained) model.

    ``num_gpus`` sets the number of processes started here (default: the visible GPUs,
    or 2 on CPU). ``num_nodes``/``node_rank`` are a launcher's business: a multi-node
    run is started with ``torchrun`` on each node. ``ddp_model_args`` and
    ``in_process_data_load`` are accepted for compatibility.
    """
    if num_nodes > 1 and not _under_launcher():
        raise ValueError(
            f"num_nodes={num_nodes}: a multi-node run must be started by a launcher on each node; "
            f"run `torchrun --nnodes {num_nodes} --node-rank {node_rank} ... script.py`."
        )
    if _under_launcher():
        _enter_process(loop)
        return loop._train(num_epochs, num_iterations, callbacks, grad_accumulation, **kwargs)
    from scramjet.runtime.launch import launch

    nprocs = num_gpus or (torch.cuda.device_count() if torch.cuda.is_available() else 2)
    # Plain pickle copies the tensors: torch.multiprocessing would put them in shared
    # memory, where every process would update the same weights.
    payload = pickle.dumps(
        (loop, num_epochs, num_iterations, list(callbacks or []), grad_accumulation, kwargs)
    )
    result = launch(_worker, nprocs, args=(payload,))
    loop.model.load_state_dict(result["model"])
    loop.train_history.train_history = result["history"]
    loop.epoch, loop.total_iteration_idx = result["epoch"], result["total_iteration_idx"]
    return loop.model


def _enter_process(loop: TrainLoop) -> None:
    """Mark ``loop`` as one process of a DDP run, on this process's device."""
    loop.ddp_training_mode = True
    if torch.cuda.is_available():
        loop.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))


def _worker(payload: bytes) -> dict[str, Any]:
    """One process: train, and report rank 0's weights, history and counters."""
    loop, num_epochs, num_iterations, callbacks, grad_accumulation, kwargs = pickle.loads(payload)
    _enter_process(loop)
    model = loop._train(num_epochs, num_iterations, callbacks, grad_accumulation, **kwargs)
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    out = {
        "model": state,
        "history": loop.train_history.train_history,
        "epoch": loop.epoch,
        "total_iteration_idx": loop.total_iteration_idx,
        "rank": dist.get_rank(),
    }
    return out
