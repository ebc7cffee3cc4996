"""``TrainLoop``: AIToolbox's training loop API over scramjet's :class:`~scramjet.Trainer`.

There is no second training loop here. ``fit`` runs a :class:`TTTrainer` (a Trainer whose
hooks call ``model.get_loss``/``get_predictions``) and :class:`LoopEvents` keeps the
AIToolbox-visible state: ``epoch``, ``iteration`` and ``total_iteration_idx`` (batches,
starting at -1), ``train_history`` (``loss`` = end-of-epoch train-set loss,
``accumulated_loss`` = mean of the epoch's training batches, ``val_loss``,
``train_end_test_loss``), and calls the registered callbacks' hooks.

A DataLoader with a plain sampler is rebuilt from its dataset, batch size and collate
function, so sharding across processes, exact resume and per-sample loss averaging come
from the Trainer; any other iterable of batches is used as it is.

``gpu_mode``: ``"single"`` (one device; ``cuda_device_idx`` picks the GPU), ``"dp"``
(``torch.nn.DataParallel`` over the visible GPUs; with fewer than two it trains on one
device and says so once) and ``"ddp"`` (DistributedDataParallel: under a launcher it
joins the launcher's processes; otherwise it starts one process per GPU, or two on CPU,
through :func:`scramjet.runtime.launch` and copies rank 0's trained weights back).
"""

from __future__ import annotations

import datetime
import math
import numbers
import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch import nn

from scramjet.callbacks import DEFAULT_CALLBACKS, TrainerCallback
from scramjet.compat.aitoolbox.experiment.training_history import TrainingHistory
from scramjet.compat.aitoolbox.torchtrain.train_loop._collate import (
    _append,
    _concat,
    _loss_format,
    _merge_meta,
    _rows,
)
from scramjet.compat.aitoolbox.torchtrain.train_loop._loaders import LoaderSpec, loader_spec
from scramjet.compat.aitoolbox.torchtrain.train_loop._trainer import (
    LoopEvents,
    OptimizerProxy,
    TTTrainer,
    per_loss_mean,
)
from scramjet.compat.aitoolbox.torchtrain.train_loop.components.callback_handler import (
    CallbacksHandler,
)
from scramjet.compat.aitoolbox.torchtrain.train_loop.components.message_passing import (
    MessageService,
)
from scramjet.compat.aitoolbox.torchtrain.train_loop.components.model_prediction_store import (
    ModelPredictionStore,
)
from scramjet.runtime import distributed as dist
from scramjet.trainer import Trainer
from scramjet.trainer.data_order import gather_shards

__all__ = ["EndEvaluation", "LoaderSpec", "TrainLoop", "loader_spec"]

_GPU_MODES = ("single", "dp", "ddp")
#: fit's keyword arguments besides the four named ones (dp, ddp, resume).
_FIT_KEYS = (
    "dp_model_args",
    "ddp_model_args",
    "in_process_data_load",
    "num_nodes",
    "node_rank",
    "num_gpus",
    "resume_from",
)
_SETS = {"train": "train_loader", "validation": "validation_loader", "test": "test_loader"}
_STORE = {"train": "train", "validation": "val", "test": "test"}


def _new_amp_scaler(enabled: bool) -> Any:
    """AIToolbox's ``amp_scaler``: a CUDA GradScaler, enabled only for AMP on CUDA."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.cuda.amp.GradScaler is deprecated
        return torch.cuda.amp.GradScaler(enabled=enabled)


class TrainLoop:
    """Trains a ``TTModel`` (or a ``ModelWrap``) on DataLoaders, AIToolbox-style.

    Args:
        model: a ``TTModel`` (``get_loss``/``get_predictions``, optionally ``get_loss_eval``)
            or a ``ModelWrap`` (a plain module plus a batch feed definition).
        train_loader, validation_loader, test_loader: DataLoaders or any iterables of
            batches (the last two may be None).
        optimizer: a torch optimizer, a :class:`MultiOptimizer`, or any object with
            ``step``/``zero_grad``.
        criterion: passed to ``get_loss``.
        collate_batch_pred_fn: ``(batch predictions, collected) -> collected``.
        pred_transform_fn: ``collected -> predictions`` (default: concatenate tensors).
        end_auto_eval: compute the train/validation losses at each epoch end and the test
            loss at the end of training (``train_history``); an int N computes the epoch-end
            losses in epochs 0, N, 2N, ... only; False computes none of them. The mean
            training loss of the epoch's batches (``accumulated_loss``) is always recorded.
        lazy_experiment_save, print_callbacks: accepted for compatibility.
        gpu_mode: ``"single"``, ``"dp"`` or ``"ddp"`` (see the module docstring).
        cuda_device_idx: GPU index for ``"single"``.
        use_amp: True or a dict (e.g. ``{"opt_level": "O1"}``): autocast, fp16 with a
            GradScaler on CUDA, bf16 on CPU; ``{"opt_level": "O0"}``: full precision.
    """

    def __init__(
        self,
        model: nn.Module,
        train_loader: Any,
        validation_loader: Any,
        test_loader: Any,
        optimizer: Any,
        criterion: Any,
        collate_batch_pred_fn: Callable[[Any, list[Any]], list[Any]] | None = None,
        pred_transform_fn: Callable[[list[Any]], Any] | None = None,
        end_auto_eval: bool | int = True,
        lazy_experiment_save: bool = False,
        print_callbacks: bool = False,
        gpu_mode: str = "single",
        cuda_device_idx: int | None = None,
        use_amp: bool | dict[str, Any] = False,
    ) -> None:
        if gpu_mode not in _GPU_MODES:
            raise ValueError(f"gpu_mode must be one of {_GPU_MODES}; received {gpu_mode!r}.")
        if not isinstance(end_auto_eval, int) or (
            not isinstance(end_auto_eval, bool) and end_auto_eval < 1
        ):
            raise ValueError(
                f"end_auto_eval must be True, False or an epoch interval >= 1; received "
                f"{end_auto_eval!r}. end_auto_eval=2 computes the epoch-end losses every "
                "second epoch."
            )
        feed = getattr(model, "batch_model_feed_def", None)
        inner = getattr(model, "model", model) if feed is not None else model
        if not isinstance(inner, nn.Module):
            raise TypeError(
                f"model must be a TTModel (an nn.Module) or a ModelWrap; received "
                f"{type(model).__name__}. Subclass TTModel and implement get_loss/get_predictions."
            )
        self.model: nn.Module = inner
        self.batch_model_feed_def = feed
        self.train_loader, self.validation_loader, self.test_loader = (
            train_loader,
            validation_loader,
            test_loader,
        )
        self.optimizer, self.criterion = optimizer, criterion
        self.collate_batch_pred_fn = collate_batch_pred_fn
        self.pred_transform_fn = pred_transform_fn
        self.end_auto_eval, self.lazy_experiment_save = end_auto_eval, lazy_experiment_save
        self.print_callbacks = print_callbacks
        self.gpu_mode, self.cuda_device_idx, self.use_amp = gpu_mode, cuda_device_idx, use_amp
        self.device = self._device()
        self.amp_scaler = _new_amp_scaler(bool(use_amp) and self.device.type == "cuda")
        self.experiment_timestamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
        self.epoch, self.iteration, self.total_iteration_idx = 0, 0, -1
        self.num_epochs, self.num_iterations, self.grad_accumulation = 0, 0, 1
        self.early_stop = False
        self._loss_batch_accum: list[Any] = []  # the current epoch's batch losses, in order
        self._loss_batch_sizes: list[int] = []  # their batch sizes
        self.ddp_training_mode = False
        self.train_history = TrainingHistory(has_validation=validation_loader is not None)
        self.prediction_store = ModelPredictionStore(auto_purge=True)
        self.message_service = MessageService()
        self.callbacks: list[Any] = []
        self.callbacks_handler = CallbacksHandler(self)
        self.trainer: TTTrainer | None = None
        # Set by the tracked variants (TrainLoopCheckpoint, ...).
        self.experiment: Any = None
        self.hyperparams: dict[str, Any] = {}
        self.end_result_packages: list[tuple[str, Any, Any]] = []

    def __call__(self, num_epochs: int = 0, num_iterations: int = 0, **kwargs: Any) -> Any:
        """Same as :meth:`fit`."""
        return self.fit(num_epochs, num_iterations, **kwargs)

    # ----------------------------------------------------------------- state helpers
    def _device(self) -> torch.device:
        if not torch.cuda.is_available():
            return torch.device("cpu")
        if self.cuda_device_idx is not None and self.gpu_mode == "single":
            return torch.device("cuda", self.cuda_device_idx)
        return torch.device("cuda")

    def _precision(self) -> str:
        if not self.use_amp:
            return "no"
        if isinstance(self.use_amp, dict) and self.use_amp.get("opt_level") == "O0":
            return "no"
        return "fp16" if self.device.type == "cuda" else "bf16"

    @property
    def ep_stop_training_flag(self) -> bool:
        """Alias of :attr:`early_stop`."""
        return self.early_stop

    @ep_stop_training_flag.setter
    def ep_stop_training_flag(self, value: bool) -> None:
        self.early_stop = bool(value)

    def should_execute_optimizer_update(self) -> bool:
        """Whether the batch :attr:`iteration` of the epoch ends an accumulation window."""
        last = len(self.train_loader) - 1 if hasattr(self.train_loader, "__len__") else None
        return (self.iteration + 1) % self.grad_accumulation == 0 or self.iteration == last

    def get_num_training_steps(self) -> int:
        """Optimizer updates in the whole run, counted as AIToolbox counts them: with
        ``num_iterations`` (batches), ``num_iterations // grad_accumulation``, which leaves
        out the update that each epoch's last, shorter accumulation window makes."""
        if self.num_iterations:
            return self.num_iterations // self.grad_accumulation
        return math.ceil(len(self.train_loader) / self.grad_accumulation) * self.num_epochs

    def get_schedulers(self) -> list[Any]:
        """The registered callbacks that are learning-rate schedulers."""
        return [c for c in self.callbacks if _is_scheduler(c)]

    def insert_metric_result_into_history(self, metric_name: str, metric_result: Any) -> None:
        """Append ``metric_result`` to ``train_history[metric_name]`` (as this epoch's)."""
        self.train_history.insert_single_result_into_history(
            metric_name, metric_result, epoch=self.epoch
        )

    # ----------------------------------------------------------------- fit
    def fit(
        self,
        num_epochs: int = 0,
        num_iterations: int = 0,
        callbacks: Iterable[Any] | None = None,
        grad_accumulation: int = 1,
        **kwargs: Any,
    ) -> Any:
        """Train for ``num_epochs`` epochs or ``num_iterations`` batches (not both).

        ``dp_model_args`` (for ``"dp"``) and ``ddp_model_args``, ``in_process_data_load``,
        ``num_nodes``, ``node_rank``, ``num_gpus`` (for ``"ddp"``) are passed on;
        ``resume_from=<checkpoint file or folder>`` continues a run exactly.

        Returns:
            The trained model.
        """
        _check_fit_args(num_epochs, num_iterations, callbacks, grad_accumulation)
        if (num_epochs > 0) == (num_iterations > 0):
            raise ValueError(
                f"fit needs exactly one of num_epochs > 0 or num_iterations > 0; received "
                f"num_epochs={num_epochs}, num_iterations={num_iterations}. Pass one of them."
            )
        unknown = sorted(set(kwargs) - set(_FIT_KEYS))
        if unknown:
            raise TypeError(
                f"fit() got unknown keyword argument(s) {', '.join(map(repr, unknown))}; it takes "
                f"num_epochs, num_iterations, callbacks, grad_accumulation and "
                f"{', '.join(_FIT_KEYS)}. Check the spelling."
            )
        if kwargs.get("resume_from") is not None:
            kwargs["resume_from"] = _resume_source(kwargs["resume_from"])
        if self.gpu_mode == "dp":
            resume = {"resume_from": kwargs["resume_from"]} if "resume_from" in kwargs else {}
            return self._train_dp(
                num_epochs,
                num_iterations,
                callbacks,
                grad_accumulation,
                kwargs.pop("dp_model_args", None),
                **resume,
            )
        if self.gpu_mode == "ddp":
            return self._train_ddp(
                num_epochs, num_iterations, callbacks, grad_accumulation, **kwargs
            )
        return self._train(num_epochs, num_iterations, callbacks, grad_accumulation, **kwargs)

    def _train_dp(
        self,
        num_epochs: int,
        num_iterations: int,
        callbacks: Iterable[Any] | None = None,
        grad_accumulation: int = 1,
        dp_model_args: Mapping[str, Any] | None = None,
        resume_from: Any = None,
    ) -> Any:
        """Train under ``torch.nn.DataParallel`` when more than one GPU is visible."""
        if torch.cuda.device_count() < 2:
            warnings.warn(
                f"gpu_mode='dp' needs at least 2 visible GPUs; {torch.cuda.device_count()} found, "
                f"so training runs on {self.device}. For several GPUs gpu_mode='ddp' is faster.",
                stacklevel=3,
            )
            return self._train(
                num_epochs, num_iterations, callbacks, grad_accumulation, resume_from=resume_from
            )
        from scramjet.compat.aitoolbox.torchtrain.parallel import TTDataParallel

        module = self.model
        self.model = TTDataParallel(module.to(self.device), **dict(dp_model_args or {}))
        try:
            self._train(
                num_epochs, num_iterations, callbacks, grad_accumulation, resume_from=resume_from
            )
        finally:
            self.model = module
        return module

    def _train_ddp(
        self,
        num_epochs: int,
        num_iterations: int,
        callbacks: Iterable[Any] | None = None,
        grad_accumulation: int = 1,
        **kwargs: Any,
    ) -> Any:
        """Train with DistributedDataParallel (see :mod:`.ddp_launch`)."""
        from scramjet.compat.aitoolbox.torchtrain.train_loop.ddp_launch import train_ddp

        return train_ddp(self, num_epochs, num_iterations, callbacks, grad_accumulation, **kwargs)

    def _train(
        self,
        num_epochs: int,
        num_iterations: int,
        callbacks: Iterable[Any] | None = None,
        grad_accumulation: int = 1,
        **kwargs: Any,
    ) -> Any:
        """Run the Trainer for the requested epochs or batches in this process."""
        self.num_epochs, self.num_iterations = num_epochs, num_iterations
        self.grad_accumulation = grad_accumulation
        self.callbacks_handler.register_callbacks(callbacks, print_callbacks=self.print_callbacks)
        if self.ddp_training_mode:
            self.callbacks_handler.mp_filter_callbacks()
            self.callbacks_handler.execute_multiprocess_start()
        if hasattr(self.criterion, "to"):
            self.criterion = self.criterion.to(self.device)
        self.trainer = trainer = self._new_trainer(self._trainer_callbacks())
        train = loader_spec(self.train_loader, train=True)
        if train.as_is:
            trainer.train_loader_override = self.train_loader
        val = None
        if self.validation_loader is not None and self.end_auto_eval is True:
            # the Trainer's evaluation pass gives val_loss; an interval computes it itself
            val = loader_spec(self.validation_loader, train=False)
            if val.as_is:
                trainer.eval_loader_override = self.validation_loader
        if num_iterations > 0:
            per_epoch = len(self.train_loader)
            num_epochs = math.ceil(num_iterations / per_epoch)
        trainer.train(
            train.dataset,
            num_epochs,
            eval_dataset=val.dataset if val else None,
            per_device_batch_size=train.batch_size,
            gradient_accumulation_steps=grad_accumulation,
            train_dataloader_kwargs=train.kwargs,
            eval_dataloader_kwargs=val.kwargs if val else None,
            resume_from=kwargs.get("resume_from"),
            eval_per_device_batch_size=val.batch_size if val else None,
        )
        return self.model

    def _trainer_callbacks(self) -> list[TrainerCallback]:
        """The Trainer's callbacks: the loop's events first, the core defaults, then the given ones."""
        core = [c for c in self.callbacks if isinstance(c, TrainerCallback)]
        core += [
            c.trainer_callback
            for c in self.callbacks
            if isinstance(getattr(c, "trainer_callback", None), TrainerCallback)
        ]
        replaced = {type(c) for c in core}
        out: list[TrainerCallback] = [LoopEvents(self)]
        out += [cb() for cb in DEFAULT_CALLBACKS if cb not in replaced]
        out += core
        if self.end_result_packages:
            out.append(EndEvaluation(self))
        if self.experiment is not None:
            out.append(self.experiment)
        return out

    def _new_trainer(
        self, callbacks: list[TrainerCallback], predict_only: bool = False
    ) -> TTTrainer:
        optimizer = self.optimizer
        if not isinstance(optimizer, torch.optim.Optimizer):
            optimizer = OptimizerProxy(optimizer, self.model, lambda: self.total_iteration_idx)
        if predict_only and not _holds_model_params(optimizer, self.model):
            # Predictions never step: an optimizer built for another model (AIToolbox
            # accepts one there) is only checked when fit() trains with it.
            params: list[torch.Tensor] = list(self.model.parameters())
            params = params or [torch.zeros((), requires_grad=True)]
            optimizer = torch.optim.SGD(params, lr=0.0)
        device = (
            self.device if self.device.index is not None or self.device.type == "cuda" else None
        )
        return TTTrainer(self, optimizer, callbacks, self._precision(), device)

    def _trainer(self) -> TTTrainer:
        """The run's Trainer, or a new one for predictions before ``fit``."""
        if self.trainer is None:
            self.trainer = self._new_trainer([LoopEvents(self)], predict_only=True)
        return self.trainer

    @property
    def loss_batch_accum(self) -> list[Any]:
        """The current epoch's batch losses as floats (a dict of floats per loss for a
        ``MultiLoss``), read from the device when asked for, not at every step."""
        self._loss_batch_accum[:] = [_plain_loss(v) for v in self._loss_batch_accum]
        return self._loss_batch_accum

    @loss_batch_accum.setter
    def loss_batch_accum(self, values: list[Any]) -> None:
        self._loss_batch_accum = list(values)
        self._loss_batch_sizes = [1] * len(self._loss_batch_accum)

    # ----------------------------------------------------------------- Trainer events
    def _after_backward(
        self, trainer: Trainer, is_update: bool, loss: Any = None, size: int = 1
    ) -> None:
        """After a batch's backward: its loss into :attr:`loss_batch_accum`, the batch limit,
        and ``on_batch_end`` for a batch without update."""
        if loss is not None:
            self._loss_batch_accum.append(loss)
            self._loss_batch_sizes.append(size)
        reached = bool(self.num_iterations) and self.total_iteration_idx + 1 >= self.num_iterations
        if reached:
            trainer.stop_training()
            if not is_update:
                trainer.end_epoch()  # the open accumulation window is applied, then the run ends
                return
        if not is_update:
            self._batch_end(trainer)

    def _batch_start(self) -> None:
        self.total_iteration_idx += 1

    def _batch_end(self, trainer: Trainer) -> None:
        self.callbacks_handler.execute_batch_end()
        if self.early_stop:
            trainer.stop_training()

    def _epoch_end(self, trainer: Trainer) -> None:
        """Losses into ``train_history``, ``on_epoch_end``, messages, early stop."""
        history = trainer.run_history
        # A MultiLoss model's losses are kept per name: its validation pass's parts are
        # taken before another loss pass starts.
        val_parts = getattr(trainer, "loss_parts", [])
        if isinstance(trainer, TTTrainer):
            trainer.loss_parts = []
        self._save_loss(
            "accumulated_loss",
            self._accumulated_per_loss() or history.get_latest_metric("train_loss_epoch"),
        )
        every = self.end_auto_eval
        if every is True or (every is not False and self.epoch % every == 0):
            loss = self.evaluate_loss_on_train_set(float_dict_format=True)
            if isinstance(loss, float):  # kept in the core history, so checkpoints carry it
                history.update_metric("train_set_loss", loss)
            self._save_loss("loss", loss)
            if self.validation_loader is not None and every is True:
                val_loss = (
                    per_loss_mean(val_parts)
                    if val_parts
                    else history.get_latest_metric("eval_loss_epoch")
                )
                self.prediction_store.insert_val_loss(
                    val_loss, self.total_iteration_idx, force=True
                )
                self._save_loss("val_loss", val_loss)
            elif self.validation_loader is not None:
                self._save_loss(
                    "val_loss", self.evaluate_loss_on_validation_set(float_dict_format=True)
                )
        self.callbacks_handler.execute_epoch_end()
        self.message_service.end_of_epoch_trigger()
        if self.early_stop:
            trainer.stop_training()

    def _save_loss(self, name: str, loss: Any) -> None:
        """A loss into ``train_history``; a MultiLoss's as ``<name>_<loss name>``, as AIToolbox did."""
        if isinstance(loss, Mapping):
            for loss_name, value in loss.items():
                self.insert_metric_result_into_history(f"{name}_{loss_name}", value)
        else:
            self.insert_metric_result_into_history(name, loss)

    def _accumulated_per_loss(self) -> dict[str, float] | None:
        """The epoch's mean training loss per name for a MultiLoss (per sample), else None."""
        values = self.loss_batch_accum
        if not values or not all(isinstance(v, Mapping) for v in values):
            return None
        return per_loss_mean(list(zip(values, self._loss_batch_sizes, strict=True)))

    def _train_end(self, trainer: Trainer) -> None:
        """The test-set loss into ``train_history``, then ``on_train_end``."""
        if self.end_auto_eval and self.test_loader is not None:
            self._save_loss(
                "train_end_test_loss", self.evaluate_loss_on_test_set(float_dict_format=True)
            )
        self.callbacks_handler.execute_train_end()

    # ----------------------------------------------------------------- losses
    def _loss_on(self, which: str, force_prediction: bool) -> Any:
        """Loss on one data set, cached in :attr:`prediction_store` for the current iteration."""
        key, idx, store = _STORE[which], self.total_iteration_idx, self.prediction_store
        if not force_prediction and getattr(store, f"has_{key}_loss")(idx):
            return getattr(store, f"get_{key}_loss")(idx)
        loader = _loader_of(self, which, "loss")
        loss = self._trainer().loss_on(loader, f"{which}-set loss")
        getattr(store, f"insert_{key}_loss")(loss, idx, force=True)
        return loss

    def evaluate_loss_on_train_set(
        self, force_prediction: bool = False, float_dict_format: bool = False
    ) -> Any:
        """Mean loss per sample on the training loader (``get_loss_eval`` if the model has it).

        As in AIToolbox: a 0-d float64 CPU tensor (a dict of them per loss for a
        ``MultiLoss``), or, with ``float_dict_format=True``, a float (a dict of floats).
        """
        return _loss_format(self._loss_on("train", force_prediction), float_dict_format)

    def evaluate_loss_on_validation_set(
        self, force_prediction: bool = False, float_dict_format: bool = False
    ) -> Any:
        """Mean loss per sample on the validation loader (a tensor, or a float with
        ``float_dict_format=True``)."""
        return _loss_format(self._loss_on("validation", force_prediction), float_dict_format)

    def evaluate_loss_on_test_set(
        self, force_prediction: bool = False, float_dict_format: bool = False
    ) -> Any:
        """Mean loss per sample on the test loader (a tensor, or a float with
        ``float_dict_format=True``)."""
        return _loss_format(self._loss_on("test", force_prediction), float_dict_format)

    # ----------------------------------------------------------------- predictions
    def _predict_on(self, which: str, force_prediction: bool, execute_callbacks: bool) -> Any:
        key, idx, store = _STORE[which], self.total_iteration_idx, self.prediction_store
        if not force_prediction and getattr(store, f"has_{key}_predictions")(idx):
            return getattr(store, f"get_{key}_predictions")(idx)
        predictions = self.predict_with_model(
            _loader_of(self, which, "predictions"), execute_callbacks, dataset_info={"type": which}
        )
        getattr(store, f"insert_{key}_predictions")(predictions, idx, force=True)
        return predictions

    def predict_on_train_set(
        self, force_prediction: bool = False, execute_callbacks: bool = False
    ) -> tuple[Any, Any, Any]:
        """``(y_pred, y_true, metadata)`` on the training loader (cached per iteration)."""
        result: tuple[Any, Any, Any] = self._predict_on(
            "train", force_prediction, execute_callbacks
        )
        return result

    def predict_on_validation_set(
        self, force_prediction: bool = False, execute_callbacks: bool = False
    ) -> tuple[Any, Any, Any]:
        """``(y_pred, y_true, metadata)`` on the validation loader (cached per iteration)."""
        result: tuple[Any, Any, Any] = self._predict_on(
            "validation", force_prediction, execute_callbacks
        )
        return result

    def predict_on_test_set(
        self, force_prediction: bool = False, execute_callbacks: bool = False
    ) -> tuple[Any, Any, Any]:
        """``(y_pred, y_true, metadata)`` on the test loader (cached per iteration)."""
        result: tuple[Any, Any, Any] = self._predict_on("test", force_prediction, execute_callbacks)
        return result

    def predict_with_model(
        self,
        dataloader: Any,
        execute_callbacks: bool = False,
        move_to_device: bool = True,
        dataset_info: Mapping[str, Any] | None = None,
    ) -> tuple[Any, Any, Any]:
        """``get_predictions`` over ``dataloader``, collected into ``(y_pred, y_true, metadata)``.

        With ``execute_callbacks`` every batch's predictions go to the callbacks'
        ``on_after_batch_prediction(y_pred, y_true, metadata, dataset_info)``. Across
        processes each rank predicts its share and every rank gets all of them, in
        dataset order.
        """
        world = dist.get_world_size()
        if world > 1 and loader_spec(dataloader, train=False).as_is:
            raise ValueError(
                f"predicting across {world} processes needs a DataLoader with a plain sequential "
                f"or random sampler, so each process predicts its share; received "
                f"{type(dataloader).__name__}. Pass DataLoader(dataset, batch_size=...)."
            )
        batches = self._trainer().predict_batches(dataloader)
        if execute_callbacks:
            for y_pred, y_true, meta in batches:
                self.callbacks_handler.execute_after_batch_prediction(
                    y_pred, y_true, meta, dict(dataset_info or {})
                )
        y_pred, y_true = (
            self._collate([b[0] for b in batches]),
            self._collate([b[1] for b in batches]),
        )
        meta = _merge_meta([b[2] for b in batches])
        if world > 1:
            n = len(dataloader.dataset)
            y_pred, y_true = gather_shards(_rows(y_pred), n), gather_shards(_rows(y_true), n)
            meta = None if meta is None else gather_shards(meta, n)
        return y_pred, y_true, meta

    def _collate(self, parts: list[Any]) -> Any:
        if self.collate_batch_pred_fn is None and self.pred_transform_fn is None:
            return _concat(parts)
        collected: list[Any] = []
        for part in parts:
            collected = (self.collate_batch_pred_fn or _append)(part, collected)
        return (self.pred_transform_fn or _concat)(collected)


def _loader_of(loop: TrainLoop, which: str, what: str) -> Any:
    """The loop's loader of data set ``which``; a clear error when it was not given."""
    loader = getattr(loop, _SETS[which])
    if loader is None:
        raise ValueError(
            f"the {_SETS[which]} is None, so there are no {which}-set {what}; pass a "
            f"{_SETS[which]} to the TrainLoop."
        )
    return loader


def _resume_source(resume_from: Any) -> Any:
    """``resume_from`` as the Trainer reads it: a tracked run's folder → its ``checkpoints/``.

    Raises:
        ValueError: an AIToolbox experiment folder or model file, which only
            ``ModelLoadContinueTraining`` reads (the message gives the call).
    """
    path = os.fspath(resume_from) if isinstance(resume_from, str | os.PathLike) else None
    if path is None or not os.path.isdir(path):
        _check_not_a_model_file(resume_from)
        return resume_from
    if os.path.isfile(os.path.join(path, "run.json")):
        return os.path.join(path, "checkpoints")  # the tracked loops' run folder
    saved = [os.path.join(path, d) for d in ("model", "checkpoint_model", ".")]
    files = sorted(f.path for d in saved if os.path.isdir(d) for f in os.scandir(d))
    model_files = [f for f in files if f.endswith(".pth")]
    if model_files:  # an AIToolbox experiment folder, or one of its model folders
        _check_not_a_model_file(os.path.normpath(model_files[-1]), given=path)
    return resume_from


def _check_not_a_model_file(resume_from: Any, given: str | None = None) -> None:
    """Refuse a model file of AIToolbox's savers as ``resume_from``, saying how to continue.

    Such a file holds ``model_state_dict``/``optimizer_state_dict``/``epoch``, not the
    Trainer's full state (data order, random states, history) that ``resume_from`` restores.
    """
    if resume_from is None or not os.path.isfile(resume_from):
        return
    from scramjet.checkpoint.manager import read_checkpoint

    try:
        state = read_checkpoint(resume_from)["state"]
    except Exception:  # not a checkpoint file: the Trainer's resume says why
        return
    if "model" in state or "model_state_dict" not in state:
        return
    folder = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(resume_from))))
    experiment, stamp = folder[:-20], folder[-19:]  # <experiment>_<%Y-%m-%d_%H-%M-%S>
    saved_dir = os.path.basename(os.path.dirname(os.path.abspath(resume_from)))
    epoch = state.get("epoch") if saved_dir == "checkpoint_model" else None
    project_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(resume_from))))
    what = f"holds {os.path.basename(resume_from)!r}, " if given else "is "
    raise ValueError(
        f"resume_from={str(given or resume_from)!r} {what}a model file written by an AIToolbox saver "
        f"(model, optimizer and scheduler states and the epoch), not a checkpoint of the "
        f"whole training state that resume_from restores. Continue from it as in AIToolbox: "
        f"fit(..., callbacks=[ModelLoadContinueTraining({stamp!r}, saved_model_dir="
        f"{saved_dir!r}, epoch_num={epoch}, project_name={os.path.basename(project_dir)!r}, "
        f"experiment_name={experiment!r}, local_model_result_folder_path="
        f"{os.path.dirname(project_dir)!r})])."
    )


def _check_fit_args(
    num_epochs: Any, num_iterations: Any, callbacks: Any, grad_accumulation: Any
) -> None:
    """Refuse ``fit`` arguments of the wrong type, naming the argument as the user wrote it."""
    for name, value in (("num_epochs", num_epochs), ("num_iterations", num_iterations)):
        if not isinstance(value, numbers.Real):
            raise TypeError(
                f"{name} must be an int; received {type(value).__name__} ({value!r}). "
                f"Pass e.g. {name}=3."
            )
    if (
        isinstance(grad_accumulation, bool)
        or not isinstance(grad_accumulation, numbers.Integral)
        or grad_accumulation < 1
    ):
        raise ValueError(
            f"grad_accumulation must be an int ≥ 1 (batches per optimizer update); received "
            f"{grad_accumulation!r}. Pass e.g. grad_accumulation=1 (no accumulation)."
        )
    if callbacks is not None and (
        isinstance(callbacks, str | Mapping) or not isinstance(callbacks, Iterable)
    ):
        raise TypeError(
            f"callbacks must be a list of callbacks; received {type(callbacks).__name__} "
            f"({callbacks!r}). Pass callbacks=[callback] for a single one."
        )


def _is_scheduler(callback: Any) -> bool:
    """Whether a registered callback is a learning-rate scheduler (it holds one)."""
    return any(
        type(c).__name__ in ("AbstractScheduler", "GeneralLRSchedulerCallback")
        for c in type(callback).__mro__
    ) or hasattr(callback, "scheduler")


class EndEvaluation(TrainerCallback):
    """Computes the end-of-training result packages and stores them in the tracked run."""

    def __init__(self, loop: TrainLoop) -> None:
        self.loop = loop
        self.results: dict[str, dict[str, Any]] = {}

    def on_training_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Predict each loader (all ranks), compute its package, log it (rank 0 writes)."""
        for name, loader, package in self.loop.end_result_packages:
            y_pred, y_true, meta = self.loop.predict_with_model(loader)
            results = package.prepare_result_package(
                y_true,
                y_pred,
                hyperparameters=self.loop.hyperparams,
                training_history=self.loop.train_history.get_train_history(),
                metadata=meta,
            )
            self.results[name] = results
            if self.loop.experiment is not None:
                self.loop.experiment.log_results(name, results)


def _holds_model_params(optimizer: torch.optim.Optimizer, model: nn.Module) -> bool:
    """Whether the optimizer holds one of the model's parameters (or the model has none)."""
    model_params = {id(p) for p in model.parameters()}
    held = (id(p) for g in optimizer.param_groups for p in g["params"])
    return not model_params or any(i in model_params for i in held)


def _plain_loss(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return float(value.item())
    if isinstance(value, dict):
        return {k: _plain_loss(v) for k, v in value.items()}
    return value
