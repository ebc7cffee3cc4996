"""Devices and multi-process runs: where to train, and how processes cooperate.

- :mod:`~scramjet.runtime.devices`: :func:`default_device`, :func:`move_to_device`,
  GPU selection by free memory (:func:`select_gpus`).
- :mod:`~scramjet.runtime.distributed`: process group setup from the launcher's
  environment and collectives that are no-ops in a single process.
- :mod:`~scramjet.runtime.fsdp`: :func:`shard_model` shards a model with FSDP2
  (``fully_shard``) for models that do not fit one device.
- :mod:`~scramjet.runtime.files`: :func:`atomic_write` for crash-safe file writes.
- :mod:`~scramjet.runtime.processes`: ``pid_alive``, whether a process still runs, and
  ``fit_socket_tempdir``, a temp folder short enough for DataLoader workers' sockets.
- :mod:`~scramjet.runtime.launch`: :func:`launch` runs a function in N processes.
- :mod:`~scramjet.runtime.preemption`: SIGTERM becomes a checkpoint at the next step and
  :class:`TrainingPreempted` (exit status :data:`PREEMPTED_EXIT_CODE`), on every rank at once.
- ``scramjet launch`` (:mod:`~scramjet.runtime.cli`) runs a script through torchrun.
"""

from __future__ import annotations

from scramjet.runtime.devices import (
    GpuInfo,
    NoGpuAvailableError,
    choose_gpus,
    default_device,
    move_to_device,
    query_gpus,
    select_gpus,
    set_visible_gpus,
)
from scramjet.runtime.distributed import (
    DistEnv,
    barrier,
    broadcast_object,
    destroy_distributed,
    eval_sampler,
    gather,
    gather_for_metrics,
    gather_object,
    get_local_rank,
    get_rank,
    get_world_size,
    init_distributed,
    is_distributed,
    is_main_process,
    read_env,
    reduce,
    unpad_gathered,
    wrap_data_parallel,
)
from scramjet.runtime.files import atomic_write, fsync_dir
from scramjet.runtime.fsdp import shard_model
from scramjet.runtime.launch import LaunchError, launch
from scramjet.runtime.preemption import PREEMPTED_EXIT_CODE, PreemptionWatcher, TrainingPreempted

__all__ = [
    "PREEMPTED_EXIT_CODE",
    "DistEnv",
    "GpuInfo",
    "LaunchError",
    "NoGpuAvailableError",
    "PreemptionWatcher",
    "TrainingPreempted",
    "atomic_write",
    "barrier",
    "broadcast_object",
    "choose_gpus",
    "default_device",
    "destroy_distributed",
    "eval_sampler",
    "fsync_dir",
    "gather",
    "gather_for_metrics",
    "gather_object",
    "get_local_rank",
    "get_rank",
    "get_world_size",
    "init_distributed",
    "is_distributed",
    "is_main_process",
    "launch",
    "move_to_device",
    "query_gpus",
    "read_env",
    "reduce",
    "select_gpus",
    "set_visible_gpus",
    "shard_model",
    "unpad_gathered",
    "wrap_data_parallel",
]
