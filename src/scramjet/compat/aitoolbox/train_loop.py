"""The ``TrainLoop`` family: AIToolbox's constructors and ``fit`` over scramjet's Trainer.

There is no second training loop here. ``TrainLoop.fit`` builds a Trainer subclass whose
``calculate_*_batch_loss`` hooks call ``model.get_loss(batch, criterion, device)``, turns
the given DataLoaders back into dataset + batch size + collate function (so sharding
across processes, exact resume and per-sample loss averaging come from the Trainer),
and adds an :class:`~scramjet.tracking.Experiment` for the tracked variants.

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
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, RandomSampler, SequentialSampler

from scramjet.callbacks import DEFAULT_CALLBACKS, TrainerCallback
from scramjet.compat.aitoolbox.callbacks import AbstractCallback, to_trainer_callback
from scramjet.compat.aitoolbox.model import default_get_loss, default_get_predictions, route_forward
from scramjet.compat.aitoolbox.results import AbstractResultPackage
from scramjet.runtime import distributed as dist
from scramjet.tracking.experiment import Experiment
from scramjet.trainer import Trainer
from scramjet.trainer.data_order import ShardSampler

_GPU_MODES = ("single", "dp", "ddp")
_LOADER_KEYS = ("num_workers", "pin_memory", "worker_init_fn", "timeout")


def _loader_spec(loader: Any, train: bool) -> dict[str, Any] | None:
    """Dataset, batch size, collate function and settings of a plain DataLoader, or None."""
    if loader is None or not isinstance(loader, DataLoader) or loader.batch_size is None:
        return None
    if isinstance(loader.dataset, IterableDataset):
        return None
    if not isinstance(loader.sampler, SequentialSampler | RandomSampler):
        return None
    kwargs = {k: getattr(loader, k) for k in _LOADER_KEYS}
    if loader.num_workers > 0:
        kwargs.update(
            persistent_workers=loader.persistent_workers, prefetch_factor=loader.prefetch_factor
        )
    if train:
        kwargs.update(shuffle=isinstance(loader.sampler, RandomSampler), drop_last=loader.drop_last)
    return {
        "dataset": loader.dataset,
        "batch_size": loader.batch_size,
        "collate_fn": loader.collate_fn,
        "kwargs": kwargs,
    }


def _batch_size(batch: Any) -> int:
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else 1
    if isinstance(batch, list | tuple) and batch:
        return _batch_size(batch[0])
    if isinstance(batch, Mapping) and batch:
        return _batch_size(next(iter(batch.values())))
    return 1


class TTTrainer(Trainer):
    """The Trainer used by ``TrainLoop``: the loss comes from ``model.get_loss``.

    ``clip_gradients`` fires the ``on_after_gradient_update`` event (gradients already
    unscaled under fp16) so AIToolbox-style gradient callbacks act once per update.
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
        self.eval_loader_override: Any = None
        self.eval_collate: Callable[..., Any] | None = None
        self.eval_loader_kwargs: dict[str, Any] = {}
        self.train_loader_override: Any = None
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
        if get_loss is None:
            return default_get_loss(self.model, batch, criterion, self.device)
        if isinstance(self.model, nn.parallel.DistributedDataParallel):
            with route_forward(tt, get_loss):
                return self.model(batch, criterion, self.device)
        return get_loss(batch, criterion, self.device)

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

    def create_train_dataloader(
        self, batch_size: int, train_dl_kwargs: Mapping[str, Any] | None = None
    ) -> Iterable[Any]:
        """The user's loader when it cannot be rebuilt, else the Trainer's sharded, resumable one."""
        if self.train_loader_override is not None:
            return self.train_loader_override
        return super().create_train_dataloader(batch_size, train_dl_kwargs)

    def create_eval_dataloader(
        self, batch_size: int, eval_dl_kwargs: Mapping[str, Any] | None = None
    ) -> Iterable[Any]:
        """Validation batches: rank ``r`` takes samples ``r, r + W, ...`` with the loader's collate."""
        if self.eval_loader_override is not None:
            return self.eval_loader_override
        sampler = ShardSampler(self.eval_dataset, dist.get_world_size(), dist.get_rank())
        kwargs = {**self.eval_loader_kwargs, **(eval_dl_kwargs or {})}
        kwargs.pop("shuffle", None)
        return DataLoader(
            self.eval_dataset,
            batch_size=batch_size,
            sampler=sampler,
            collate_fn=self.eval_collate or self.collate_fn,
            **kwargs,
        )


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
        names = {"train_loss_epoch": "loss", "eval_loss_epoch": "val_loss"}
        return {
            names.get(n, n): history.get_metric_values(n)
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
        for cb in user:
            if isinstance(cb, _TrackingCallback):
                cb.attach(self)
        aitb = sorted(
            (c for c in user if isinstance(c, AbstractCallback)), key=lambda c: c.execution_order
        )
        others = [c for c in user if isinstance(c, TrainerCallback)]
        bad = [c for c in user if not isinstance(c, AbstractCallback | TrainerCallback)]
        if bad:
            raise TypeError(
                f"callbacks must be AbstractCallback or TrainerCallback instances; received "
                f"{type(bad[0]).__name__}."
            )
        self.callbacks = user
        out: list[TrainerCallback] = [cb() for cb in DEFAULT_CALLBACKS]
        out += [to_trainer_callback(c, self) for c in aitb] + others
        if self.end_result_packages:
            out.append(_EndEvaluation(self))
        if self.experiment is not None:
            out.append(self.experiment)
        return out

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
        train_cbs = self._trainer_callbacks(callbacks)
        device = self._device()
        probe = device or (
            torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
        )
        self.trainer = trainer = TTTrainer(self, train_cbs, self._precision(probe), device)
        if isinstance(self.criterion, nn.Module):
            self.criterion.to(trainer.device)
        train = _loader_spec(self.train_loader, train=True)
        if train is None:
            trainer.train_loader_override = self.train_loader
            train = {
                "dataset": self.train_loader.dataset,
                "batch_size": self.train_loader.batch_size or 1,
                "collate_fn": None,
                "kwargs": {},
            }
        val_ds, val_bs = self._setup_eval(trainer)
        if num_iterations > 0:
            per_epoch = max(1, math.ceil(len(self.train_loader) / grad_accumulation))
            num_epochs = max(num_epochs, math.ceil(num_iterations / per_epoch))
        trainer.train(
            train["dataset"],
            num_epochs,
            eval_dataset=val_ds,
            per_device_batch_size=train["batch_size"],
            max_num_train_steps=num_iterations or None,
            gradient_accumulation_steps=grad_accumulation,
            train_dataloader_kwargs=train["kwargs"],
            collate_fn=train["collate_fn"],
            resume_from=kwargs.get("resume_from"),
            eval_per_device_batch_size=val_bs,
        )
        return self.model

    def _setup_eval(self, trainer: TTTrainer) -> tuple[Any, int | None]:
        loader = self.validation_loader
        if loader is None:
            return None, None
        spec = _loader_spec(loader, train=False)
        if spec is None:
            trainer.eval_loader_override = loader
            return loader.dataset, loader.batch_size or 1
        trainer.eval_collate, trainer.eval_loader_kwargs = spec["collate_fn"], spec["kwargs"]
        return spec["dataset"], spec["batch_size"]

    # ----------------------------------------------------------------- predictions
    def _predict(self, loader: Any) -> tuple[Any, Any, Any]:
        """``get_predictions`` over a loader; across processes gathered in dataset order."""
        spec = _loader_spec(loader, train=False)
        world = dist.get_world_size()
        if spec is not None:
            loader = DataLoader(
                spec["dataset"],
                batch_size=spec["batch_size"],
                collate_fn=spec["collate_fn"],
                sampler=ShardSampler(spec["dataset"], world, dist.get_rank()),
                **spec["kwargs"],
            )
        model = self.model
        device = self.device
        get_predictions = getattr(model, "get_predictions", None)
        preds, trues, metas = [], [], []
        was_training = model.training
        model.eval()
        with torch.no_grad():
            for batch in loader:
                if get_predictions is not None:
                    y_pred, y_true, meta = get_predictions(batch, device)
                else:
                    y_pred, y_true, meta = default_get_predictions(model, batch, device)
                preds.append(y_pred)
                trues.append(y_true)
                metas.append(meta)
        model.train(was_training)
        collate = self.collate_batch_pred_fn or _concat
        y_pred, y_true = collate(preds), collate(trues)
        meta_out = _merge_meta(metas)
        if world > 1 and spec is not None:
            n = len(spec["dataset"])
            y_pred, y_true = _gather_ordered(y_pred, n), _gather_ordered(y_true, n)
            if meta_out is not None:
                meta_out = {k: _gather_ordered(v, n) for k, v in meta_out.items()}
        return y_pred, y_true, meta_out

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


def _gather_ordered(local: Any, num_samples: int) -> Any:
    # Rank r holds samples r, r + W, ... (ShardSampler): gather, then restore dataset order.
    world = dist.get_world_size()
    parts = dist.gather_object(local.tolist() if isinstance(local, torch.Tensor) else list(local))
    ordered: list[Any] = [None] * num_samples
    for r, part in enumerate(parts):
        for j, item in enumerate(part):
            ordered[r + j * world] = item
    return torch.tensor(ordered) if isinstance(local, torch.Tensor) else ordered


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


def storage_url(cloud_save_mode: str | None, bucket_name: str, cloud_dir_prefix: str) -> str | None:
    """``"s3"`` → ``s3://bucket/prefix``, ``"gcs"`` → ``gs://bucket/prefix``, None/"local" → None."""
    if cloud_save_mode in (None, "local", ""):
        return None
    schemes = {"s3": "s3", "aws_s3": "s3", "gcs": "gs", "google_storage": "gs", "gs": "gs"}
    if cloud_save_mode not in schemes:
        raise ValueError(
            f"cloud_save_mode must be 's3', 'gcs' or None (local only); received {cloud_save_mode!r}."
        )
    prefix = cloud_dir_prefix.strip("/")
    return f"{schemes[cloud_save_mode]}://{bucket_name}" + (f"/{prefix}" if prefix else "")


class _TrackingCallback(AbstractCallback):
    """A callback that turns a TrainLoop into a tracked run (ModelCheckpoint, ModelTrainEndSave)."""

    def __init__(
        self,
        name: str,
        experiment: Experiment,
        hyperparams: Mapping[str, Any],
        packages: list[tuple[str, str, AbstractResultPackage]],
    ) -> None:
        super().__init__(name)
        self.experiment, self.hyperparams, self.packages = experiment, dict(hyperparams), packages

    def attach(self, loop: TrainLoop) -> None:
        """Make ``loop`` tracked by this callback's Experiment."""
        if loop.experiment is not None and loop.experiment is not self.experiment:
            raise ValueError(
                f"{self.callback_name}: this TrainLoop already saves into a tracked run; use a plain "
                f"TrainLoop with this callback, or drop the callback."
            )
        loop.experiment, loop.hyperparams = self.experiment, self.hyperparams
        for name, which, package in self.packages:
            loader = getattr(loop, f"{which}_loader")
            if loader is not None:
                loop.end_result_packages.append((name, loader, package))


def make_experiment(
    project_name: str,
    experiment_name: str,
    local_model_result_folder_path: str | os.PathLike[str],
    hyperparams: Mapping[str, Any] | None,
    cloud_save_mode: str | None,
    bucket_name: str,
    cloud_dir_prefix: str,
    checkpoint: str | int | None,
    keep_best: int,
    monitor: str = "eval_loss_epoch",
) -> Experiment:
    """The :class:`Experiment` behind the tracked TrainLoops and saving callbacks."""
    return Experiment(
        project_name,
        experiment_name,
        root=local_model_result_folder_path,
        hyperparams=hyperparams,
        storage=storage_url(cloud_save_mode, bucket_name, cloud_dir_prefix),
        checkpoint=checkpoint,
        keep_best=keep_best,
        monitor=monitor,
    )
