"""Training acceleration: faster model steps and cached, prefetched datasets.

- :func:`accelerate_model` / :class:`AcceleratedModel` / :class:`TrainingLearner`: backends
  (eager, ``torch.compile``, ONNX Runtime) checked against eager, with safe fallback.
- :func:`accelerate_dataset` / :class:`CachedDataset`: a sample cache shared by all
  DataLoader workers, a memory budget, and background decoding.
- :mod:`scramjet.accel.extras`: channels-last, TF32, fused optimizers, autocast.
- :mod:`scramjet.accel.sparse_backprop`: opt-in meProp for Linear layers.
"""

from __future__ import annotations

from scramjet.accel._engine import AccelerationWarning, CheckFailed, Tolerance, default_backends
from scramjet.accel._store import CacheWarning
from scramjet.accel.backends import available_backends, register_backend, unregister_backend
from scramjet.accel.dataset import CachedDataset, accelerate_dataset
from scramjet.accel.extras import fast_optimizer, fast_optimizer_kwargs, set_tf32, tf32
from scramjet.accel.model import (
    AcceleratedModel,
    TrainingLearner,
    accelerate_model,
    active_backend,
    engine_of,
    recover_backward,
)
from scramjet.accel.sparse_backprop import (
    SparseBackpropConfig,
    apply_sparse_backprop,
    remove_sparse_backprop,
)

__all__ = [
    "AcceleratedModel",
    "AccelerationWarning",
    "CacheWarning",
    "CachedDataset",
    "CheckFailed",
    "SparseBackpropConfig",
    "Tolerance",
    "TrainingLearner",
    "accelerate_dataset",
    "accelerate_model",
    "active_backend",
    "apply_sparse_backprop",
    "available_backends",
    "default_backends",
    "engine_of",
    "fast_optimizer",
    "fast_optimizer_kwargs",
    "recover_backward",
    "register_backend",
    "remove_sparse_backprop",
    "set_tf32",
    "tf32",
    "unregister_backend",
]
