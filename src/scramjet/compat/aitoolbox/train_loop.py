"""The ``TrainLoop`` family: AIToolbox's constructors and ``fit`` over scramjet's Trainer.

There is no second training loop here. ``TrainLoop.fit`` builds a Trainer subclass whose
``calculate_*_batch_loss`` hooks call ``model.get_loss(batch, criterion, device)``, turns
the given DataLoaders back into dataset + batch size + collate function (so sharding
across processes, exact resume and per-sample loss averaging come from the Trainer),
and adds an :class:`~scramjet.tracking.Experiment` for the tracked variants.
Predictions (``predict_on_*_set`` and the end-of-training result packages) run through
:meth:`Trainer.predict`, whose ``predict_step`` hook calls ``model.get_predictions``.

``gpu_mode``: ``"single"`` uses one device (``cuda_device_idx`` picks the GPU);
``"ddp"`` means the script runs under ``scramjet launch`` / ``torchrun`` and the Trainer
wraps the model in DistributedDataParallel — no processes are spawned here and no port
is hard-coded; without a launcher it runs in one process and says so. ``"dp"``
(DataParallel) is not used: it runs on one device with a warning pointing to ``"ddp"``.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, RandomSampler, SequentialSampler

from scramjet.callbacks import DEFAULT_CALLBACKS, TrainerCallback
from scramjet.compat.aitoolbox.callbacks import (
    HISTORY_NAMES,
    AbstractCallback,
    to_trainer_callback,
)
from scramjet.compat.aitoolbox.model import default_get_loss, default_get_predictions, route_forward
from scramjet.compat.aitoolbox.results import AbstractResultPackage
from scramjet.runtime import distributed as dist
from scramjet.tracking.experiment import Experiment
from scramjet.trainer import Trainer
from scramjet.trainer.data_order import gather_shards

_GPU_MODES = ("single", "dp", "ddp")
_LOADER_KEYS = ("num_workers", "pin_memory", "worker_init_fn", "timeout")


class _LoaderSpec(NamedTuple):
    """What the Trainer needs to rebuild a user's DataLoader (sharded, resumable)."""

    dataset: Any
    batch_size: int
    kwargs: dict[str, Any]  # DataLoader settings, the collate function included
    as_is: bool  # the loader cannot be rebuilt: its batches are used as they come


def _loader_spec(loader: Any, train: bool) -> _LoaderSpec:
    """Dataset, batch size and settings of a plain DataLoader; ``as_is`` for any other loader."""
    rebuildable = (
        isinstance(loader, DataLoader)
        and loader.batch_size is not None
        and not isinstance(loader.dataset, IterableDataset)
        and isinstance(loader.sampler, SequentialSampler | RandomSampler)
    )
    if not rebuildable:
        dataset = getattr(loader, "dataset", loader)
        return _LoaderSpec(dataset, getattr(loader, "batch_size", None) or 1, {}, True)
    kwargs = {k: getattr(loader, k) for k in _LOADER_KEYS}
    kwargs["collate_fn"] = loader.collate_fn
    if loader.num_workers > 0:
        kwargs.update(
            persistent_workers=loader.persistent_workers, prefetch_factor=loader.prefetch_factor
        )
    if train:
        kwargs.update(shuffle=isinstance(loader.sampler, RandomSampler), drop_last=loader.drop_last)
    return _LoaderSpec(loader.dataset, int(loader.batch_size), kwargs, False)


def _batch_size(batch: Any) -> int:
    """Samples in a collated batch: the first tensor's rows, or the length of a plain list."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else 1
    if isinstance(batch, Mapping) and batch:
        return _batch_size(next(iter(batch.values())))
    if isinstance(batch, list | tuple) and batch:
        first = batch[0]
        if isinstance(first, torch.Tensor | Mapping | list | tuple):
            return _batch_size(first)
        return len(batch)
    return 1


class TTTrainer(Trainer):
    """The Trainer used by ``TrainLoop``: the loss comes from ``model.get_loss``.

    ``clip_gradients`` fires the ``on_after_gradient_update`` event (gradients already
    unscaled under fp16) so AIToolbox-style gradient callbacks act once per update.
    ``predict_step`` calls ``model.get_predictions`` and records its
    ``(y_pred, y_true, metadata)`` in :attr:`prediction_batches` (see
    :meth:`predict_batches`). A user's loader that cannot be rebuilt is used as it is
    (:attr:`train_loader_override`, :attr:`eval_loader_override`).
    """

    custom_events = ("on_after_gradient_update",)

    def __init__(
        self,
        loop: TrainLoop,
        callbacks: list[TrainerCallback],
        precision: str,
        device: torch.device | None,
    ) -> None:
        self.loop = loop
        self.train_loader_override: Any = None
        self.eval_loader_override: Any = None
        self.prediction_batches: list[tuple[Any, Any, Any]] = []
        super().__init__(
            loop.model,
            None,
            loop.optimizer,
            callbacks=callbacks,
            precision=precision,
            device=device,
        )

    def _loss(self, batch: Any) -> torch.Tensor:
        criterion, tt = self.loop.criterion, self.unwrapped_model
        get_loss = getattr(tt, "get_loss", None)
        loss: torch.Tensor
        if get_loss is None:
            loss = default_get_loss(self.model, batch, criterion, self.device)
        elif isinstance(self.model, nn.parallel.DistributedDataParallel):
            with route_forward(tt, get_loss):
                loss = self.model(batch, criterion, self.device)
        else:
            loss = get_loss(batch, criterion, self.device)
        return loss

    def calculate_train_batch_loss(self, batch: Any) -> dict[str, Any]:
        """``model.get_loss(batch, criterion, device)``."""
        return {"loss": self._loss(batch), "model_outputs": None, "batch_size": _batch_size(batch)}

    def calculate_eval_batch_loss(self, batch: Any) -> dict[str, Any]:
        """The same loss on validation batches (under ``torch.no_grad``)."""
        return self.calculate_train_batch_loss(batch)

    def clip_gradients(self) -> None:
        """Fire ``on_after_gradient_update`` (after unscaling), then the Trainer's clipping."""
        if self.callback_handler.has("on_after_gradient_update"):
            if self.scaler is not None:
                self.scaler.unscale_(self.optimizer)
            self.callback_handler.call_event("on_after_gradient_update", self)
            return
        super().clip_gradients()

    def predict_step(self, batch: Any) -> torch.Tensor:
        """``model.get_predictions(batch, device)``, recorded in :attr:`prediction_batches`.

        Returns the batch's number once per sample: :meth:`predict` gathers these in
        dataset order, which tells ``TrainLoop`` which recorded batches count.
        """
        model = self.unwrapped_model
        get_predictions = getattr(model, "get_predictions", None)
        if get_predictions is None:
            output = default_get_predictions(model, batch, self.device)
        else:
            output = get_predictions(batch, self.device)
        self.prediction_batches.append(output)
        return torch.full((_batch_size(batch),), len(self.prediction_batches) - 1)

    def predict_batches(self, loader: Any) -> list[tuple[Any, Any, Any]]:
        """``get_predictions`` output for each of this rank's batches of ``loader``, in order.

        Runs :meth:`predict` over the loader rebuilt with this rank's share of the samples
        (or over the loader as it is, when it cannot be rebuilt).
        """
        source = _loader_spec(loader, train=False)
        outer = self.eval_loader_override
        self.eval_loader_override = loader if source.as_is else None
        self.prediction_batches = []
        try:
            numbers = self.predict(source.dataset, source.batch_size, source.kwargs)
        finally:
            self.eval_loader_override = outer
        recorded, self.prediction_batches = self.prediction_batches, []
        # predict() gives each sample's batch number in dataset order; this rank's samples
        # are r, r + W, ... Under FSDP a rank that ran out of data repeats its last batch to
        # keep forwards in step: that batch was recorded again but does not count.
        world, rank = dist.get_world_size(), dist.get_rank()
        mine: list[int] = numbers[rank::world].tolist() if isinstance(numbers, torch.Tensor) else []
        return [recorded[i] for i in sorted(set(mine))]

    def create_train_dataloader(
        self, batch_size: int, train_dl_kwargs: Mapping[str, Any] | None = None
    ) -> Iterable[Any]:
        """The user's loader when it cannot be rebuilt, else the Trainer's sharded, resumable one."""
        if self.train_loader_override is not None:
            loader: Iterable[Any] = self.train_loader_override
            return loader
        return super().create_train_dataloader(batch_size, train_dl_kwargs)

    def create_eval_dataloader(
        self, batch_size: int, eval_dl_kwargs: Mapping[str, Any] | None = None
    ) -> Iterable[Any]:
        """The user's loader when it cannot be rebuilt, else the Trainer's sharded one."""
        if self.eval_loader_override is not None:
            loader: Iterable[Any] = self.eval_loader_override
            return loader
        return super().create_eval_dataloader(batch_size, eval_dl_kwargs)


class TrainLoop:
    """Trains a :class:`TTModel` (or a plain ``nn.Module``) on DataLoaders, keras-style.

    Args:
        model: a ``TTModel`` (``get_loss``/``get_predictions``) or an ``nn.Module`` whose
            batches are ``(inputs, targets)``.
        train_loader, validation_loader, test_loader: DataLoaders (the last two may be None).
        optimizer: the optimizer.
        criterion: the loss passed to ``get_loss``.
        collate_batch_pred_fn: ``(list of per-batch predictions) -> predictions``; default
            concatenates tensors and flattens lists.
        pred_transform_fn: accepted for compatibility (the default collation covers it).
        end_auto_eval: accepted for compatibility; validation loss is computed every epoch.
        lazy_experiment_save, print_callbacks: accepted for compatibility.
        gpu_mode: ``"single"``, ``"dp"`` or ``"ddp"`` (see the module docstring).
        cuda_device_idx: GPU index for ``"single"``.
        use_amp: True or a dict (e.g. ``{"opt_level": "O1"}``) → autocast: fp16 with a
            GradScaler on CUDA, bf16 on CPU; ``{"opt_level": "O0"}`` → full precision.

    Example:
        >>> TrainLoop(model, train_loader, val_loader, None, optimizer, criterion).fit(num_epochs=2)  # doctest: +SKIP
    """

    def __init__(
        self,
        model: nn.Module,
        train_loader: Any,
        validation_loader: Any,
        test_loader: Any,
        optimizer: torch.optim.Optimizer,
        criterion: Any,
        collate_batch_pred_fn: Callable[[list[Any]], Any] | None = None,
        pred_transform_fn: Callable[[Any], Any] | None = None,
        end_auto_eval: bool = True,
        lazy_experiment_save: bool = False,
        print_callbacks: bool = False,
        gpu_mode: str = "single",
        cuda_device_idx: int | None = None,
        use_amp: bool | dict[str, Any] = False,
    ) -> None:
        if gpu_mode not in _GPU_MODES:
            raise ValueError(f"gpu_mode must be one of {_GPU_MODES}; received {gpu_mode!r}.")
        if not isinstance(model, nn.Module):
            raise TypeError(
                f"model must be a TTModel / nn.Module; received {type(model).__name__}."
            )
        self.model, self.optimizer, self.criterion = model, optimizer, criterion
        self.train_loader, self.validation_loader, self.test_loader = (
            train_loader,
            validation_loader,
            test_loader,
        )
        self.collate_batch_pred_fn = collate_batch_pred_fn
        self.pred_transform_fn = pred_transform_fn
        self.end_auto_eval, self.print_callbacks = end_auto_eval, print_callbacks
        self.gpu_mode, self.cuda_device_idx, self.use_amp = gpu_mode, cuda_device_idx, use_amp
        self.experiment: Experiment | None = None
        self.hyperparams: dict[str, Any] = {}
        self.end_result_packages: list[tuple[str, Any, AbstractResultPackage]] = []
        self.trainer: TTTrainer | None = None
        self.callbacks: list[Any] = []

    # ----------------------------------------------------------------- state seen by callbacks
    @property
    def device(self) -> torch.device:
        """The training device."""
        if self.trainer is not None:
            return self.trainer.device
        return self._device() or torch.device("cpu")

    @property
    def epoch(self) -> int:
        """Current epoch (0-based)."""
        return self.trainer.state.epoch if self.trainer is not None else 0

    @property
    def total_iteration_idx(self) -> int:
        """Optimizer updates so far."""
        return self.trainer.state.global_step if self.trainer is not None else 0

    @property
    def train_history(self) -> dict[str, list[Any]]:
        """History with AIToolbox names: ``loss`` and ``val_loss`` plus every other metric."""
        if self.trainer is None:
            return {}
        history = self.trainer.run_history
        return {
            HISTORY_NAMES.get(n, n): history.get_metric_values(n)
            for n in sorted(history.get_metric_names())
        }

    @property
    def ep_stop_training_flag(self) -> bool:
        """Set to True (e.g. from a callback) to stop after the current update."""
        return bool(self.trainer and self.trainer.state.stop_requested)

    @ep_stop_training_flag.setter
    def ep_stop_training_flag(self, value: bool) -> None:
        if value and self.trainer is not None:
            self.trainer.stop_training()

    def _device(self) -> torch.device | None:
        if (
            self.cuda_device_idx is not None
            and torch.cuda.is_available()
            and self.gpu_mode != "ddp"
        ):
            return torch.device("cuda", self.cuda_device_idx)
        return None

    def _precision(self, device: torch.device) -> str:
        if not self.use_amp:
            return "no"
        if isinstance(self.use_amp, dict) and self.use_amp.get("opt_level") == "O0":
            return "no"
        return "fp16" if device.type == "cuda" else "bf16"

    def _check_gpu_mode(self) -> None:
        if self.gpu_mode == "dp":
            warnings.warn(
                "gpu_mode='dp' trains on one device: DataParallel is superseded. For several GPUs "
                "use gpu_mode='ddp' and start the script with `scramjet launch --nproc-per-node N`.",
                stacklevel=3,
            )
        if self.gpu_mode == "ddp" and int(os.environ.get("WORLD_SIZE", "1")) <= 1:
            warnings.warn(
                "gpu_mode='ddp' but the script was not started by a launcher, so it runs in one "
                "process. Start it with `scramjet launch --nproc-per-node N script.py` (or torchrun).",
                stacklevel=3,
            )

    # ----------------------------------------------------------------- fit
    def _trainer_callbacks(self, callbacks: Iterable[Any] | None) -> list[TrainerCallback]:
        user = list(callbacks or [])
        bad = [c for c in user if not isinstance(c, AbstractCallback | TrainerCallback)]
        if bad:
            raise TypeError(
                f"callbacks must be AbstractCallback or TrainerCallback instances; received "
                f"{type(bad[0]).__name__}."
            )
        self.callbacks = user
        aitb = sorted(
            (c for c in user if isinstance(c, AbstractCallback)), key=lambda c: c.execution_order
        )
        # Registering a saving callback (ModelCheckpoint, ...) makes this loop tracked.
        given = [to_trainer_callback(c, self) for c in aitb]
        given += [c for c in user if isinstance(c, TrainerCallback)]
        # A default the user gives in their own form (e.g. TerminateOnNaN) is replaced by it.
        replaced = {type(c) for c in given}
        out = [cb() for cb in DEFAULT_CALLBACKS if cb not in replaced] + given
        if self.end_result_packages:
            out.append(_EndEvaluation(self))
        if self.experiment is not None:
            out.append(self.experiment)
        return out

    def _new_trainer(self, callbacks: list[TrainerCallback]) -> TTTrainer:
        device = self._device()
        probe = device or (
            torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
        )
        trainer = TTTrainer(self, callbacks, self._precision(probe), device)
        if isinstance(self.criterion, nn.Module):
            self.criterion.to(trainer.device)
        return trainer

    def fit(
        self,
        num_epochs: int = 0,
        num_iterations: int = 0,
        callbacks: Iterable[Any] | None = None,
        grad_accumulation: int = 1,
        **kwargs: Any,
    ) -> nn.Module:
        """Train for ``num_epochs`` epochs or ``num_iterations`` optimizer updates.

        Extra AIToolbox arguments (``ddp_model_args``, ``num_nodes``, ``node_rank``,
        ``num_gpus``, ``in_process_data_load``) are accepted: the launcher decides those.
        ``resume_from=<checkpoints folder>`` continues a run exactly.

        Returns:
            The trained model (in every ``gpu_mode``, on every rank).
        """
        if num_epochs <= 0 and num_iterations <= 0:
            raise ValueError(
                f"fit needs num_epochs > 0 or num_iterations > 0; received {num_epochs} and {num_iterations}."
            )
        self._check_gpu_mode()
        self.trainer = trainer = self._new_trainer(self._trainer_callbacks(callbacks))
        train = _loader_spec(self.train_loader, train=True)
        if train.as_is:
            trainer.train_loader_override = self.train_loader
        val = None
        if self.validation_loader is not None:
            val = _loader_spec(self.validation_loader, train=False)
            if val.as_is:
                trainer.eval_loader_override = self.validation_loader
        if num_iterations > 0:
            per_epoch = max(1, math.ceil(len(self.train_loader) / grad_accumulation))
            num_epochs = max(num_epochs, math.ceil(num_iterations / per_epoch))
        trainer.train(
            train.dataset,
            num_epochs,
            eval_dataset=val.dataset if val else None,
            per_device_batch_size=train.batch_size,
            max_num_train_steps=num_iterations or None,
            gradient_accumulation_steps=grad_accumulation,
            train_dataloader_kwargs=train.kwargs,
            eval_dataloader_kwargs=val.kwargs if val else None,
            resume_from=kwargs.get("resume_from"),
            eval_per_device_batch_size=val.batch_size if val else None,
        )
        return self.model

    # ----------------------------------------------------------------- predictions
    def _predict(self, loader: Any) -> tuple[Any, Any, Any]:
        """``get_predictions`` on every batch of ``loader``, through :meth:`Trainer.predict`.

        Across processes each rank predicts its share and the results are gathered in
        dataset order on every rank.
        """
        source = _loader_spec(loader, train=False)
        world = dist.get_world_size()
        if source.as_is and world > 1:
            raise ValueError(
                f"predicting across {world} processes needs a DataLoader with a plain sequential "
                f"or random sampler, so each process predicts its share; received "
                f"{type(loader).__name__} with {type(getattr(loader, 'sampler', None)).__name__}. "
                f"Pass DataLoader(dataset, batch_size=...)."
            )
        batches = (self.trainer or self._new_trainer([])).predict_batches(loader)
        collate = self.collate_batch_pred_fn or _concat
        y_pred, y_true = collate([b[0] for b in batches]), collate([b[1] for b in batches])
        meta = _merge_meta([b[2] for b in batches])
        if world > 1:
            n = len(source.dataset)
            y_pred, y_true = gather_shards(_rows(y_pred), n), gather_shards(_rows(y_true), n)
            meta = None if meta is None else gather_shards(meta, n)
        return y_pred, y_true, meta

    def predict_on_train_set(self) -> tuple[Any, Any, Any]:
        """``(y_pred, y_true, metadata)`` on the training loader."""
        return self._predict(self.train_loader)

    def predict_on_validation_set(self) -> tuple[Any, Any, Any]:
        """``(y_pred, y_true, metadata)`` on the validation loader."""
        return self._predict(self.validation_loader)

    def predict_on_test_set(self) -> tuple[Any, Any, Any]:
        """``(y_pred, y_true, metadata)`` on the test loader."""
        return self._predict(self.test_loader)


def _concat(parts: list[Any]) -> Any:
    if parts and all(isinstance(p, torch.Tensor) for p in parts):
        return torch.cat(
            [p.detach().cpu().reshape(-1, *p.shape[1:]) if p.dim() else p.reshape(1) for p in parts]
        )
    out: list[Any] = []
    for p in parts:
        out.extend(p.tolist() if hasattr(p, "tolist") else list(p))
    return out


def _merge_meta(metas: list[Any]) -> dict[str, list[Any]] | None:
    dicts = [m for m in metas if isinstance(m, Mapping)]
    if not dicts:
        return None
    merged: dict[str, list[Any]] = {}
    for m in dicts:
        for k, v in m.items():
            merged.setdefault(k, []).extend(v.tolist() if hasattr(v, "tolist") else list(v))
    return merged


def _rows(value: Any) -> Any:
    """A collated result as something :func:`gather_shards` takes (a tensor or a list)."""
    return value if isinstance(value, torch.Tensor | list | Mapping) else list(value)


class _EndEvaluation(TrainerCallback):
    """Computes the end-of-training result packages and stores them in the tracked run."""

    def __init__(self, loop: TrainLoop) -> None:
        self.loop = loop
        self.results: dict[str, dict[str, Any]] = {}

    def on_training_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Predict each loader (all ranks), compute its package, log it (rank 0 writes)."""
        for name, loader, package in self.loop.end_result_packages:
            y_pred, y_true, meta = self.loop._predict(loader)
            results = package.prepare_result_package(
                y_true,
                y_pred,
                hyperparameters=self.loop.hyperparams,
                training_history=self.loop.train_history,
                metadata=meta,
            )
            self.results[name] = results
            if self.loop.experiment is not None:
                self.loop.experiment.log_results(name, results)
