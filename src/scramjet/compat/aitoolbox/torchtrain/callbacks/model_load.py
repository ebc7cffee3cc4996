"""AIToolbox's model-loading callback: continue training from a saved checkpoint."""

from __future__ import annotations

from typing import Any

from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import (
    GCS_MODES,
    S3_MODES,
    AbstractExperimentCallback,
)
from scramjet.runtime.seeding import set_rng_states

__all__ = ["ModelLoadContinueTraining"]


class ModelLoadContinueTraining(AbstractExperimentCallback):
    """Continues training from a saved model: weights, optimizer, schedulers, AMP scaler, epoch.

    A checkpoint of ``ModelCheckpoint`` also restores the saved run's data-order seed and
    random-number generator states at the start of training, so the continued run draws
    the same shuffled batches and dropout masks as the uninterrupted one.

    The file is read from ``<root>/<project>/<experiment>_<timestamp>/<saved_model_dir>/``
    (the epoch's checkpoint when ``epoch_num`` is given, else the final model), after it is
    downloaded from the bucket when ``cloud_save_mode`` is ``'s3'`` or ``'gcs'``; the
    project and cloud details not given are taken from a tracked TrainLoop, so a loop
    that saves to S3 continues from the copy in its bucket, as in AIToolbox. When the callback is registered the model,
    optimizer and scaler states are loaded and the loop's ``epoch`` is set to the one
    after the saved epoch, so ``fit(num_epochs=N)`` trains the remaining epochs. The
    schedulers' states are loaded at the start of training, once every scheduler callback
    of the same ``fit`` has been registered.

    Args:
        saved_experiment_timestamp: the timestamp of the experiment that saved the model.
        saved_model_dir: ``"checkpoint_model"`` or ``"model"``.
        epoch_num: the checkpoint's epoch (None: the final model).
        ignore_saved_optimizer / ignore_saved_schedulers / ignore_saved_amp: keep the
            current object instead of restoring its saved state.
        ignore_missing_saved_schedulers: accepted for compatibility (schedulers without a
            saved state keep their own).
        used_data_parallel: the saved weights carry ``module.`` prefixes to remove.
        custom_local_loader_class: a local loader class to read the file with, instead of
            ``PyTorchLocalModelLoader`` (called with the local results folder).
        project_name ... cloud_dir_prefix: see :class:`AbstractExperimentCallback`.
        **kwargs: passed to the loader's ``load_model``.
    """

    def __init__(
        self,
        saved_experiment_timestamp: str,
        saved_model_dir: str = "checkpoint_model",
        epoch_num: int | None = None,
        ignore_saved_optimizer: bool = False,
        ignore_saved_schedulers: bool = False,
        ignore_saved_amp: bool = False,
        project_name: str | None = None,
        experiment_name: str | None = None,
        local_model_result_folder_path: str | None = None,
        cloud_save_mode: str | None = None,
        bucket_name: str | None = None,
        cloud_dir_prefix: str | None = None,
        ignore_missing_saved_schedulers: bool = False,
        used_data_parallel: bool = False,
        custom_local_loader_class: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            "Model loading and initialization from checkpoint",
            project_name,
            experiment_name,
            local_model_result_folder_path,
            cloud_save_mode,
            bucket_name,
            cloud_dir_prefix,
            execution_order=-10,
        )
        self.saved_experiment_timestamp = saved_experiment_timestamp
        self.saved_model_dir, self.epoch_num = saved_model_dir, epoch_num
        self.ignore_saved_optimizer = ignore_saved_optimizer
        self.ignore_saved_schedulers = ignore_saved_schedulers
        self.ignore_saved_amp = ignore_saved_amp
        self.ignore_missing_saved_schedulers = ignore_missing_saved_schedulers
        self.used_data_parallel = used_data_parallel
        self.custom_local_loader_class = custom_local_loader_class
        self.loader_kwargs = kwargs
        self.model_loader: Any = None
        self._saved_order: dict[str, Any] = {}  # the checkpoint's data seed and RNG states

    def on_train_loop_registration(self) -> None:
        """Load the saved model, optimizer and scaler states; continue at the next epoch."""
        loop = self.train_loop_obj
        # A plain TrainLoop has no cloud details: the file is local unless given here.
        self.try_infer_experiment_details(infer_cloud_details=hasattr(loop, "cloud_save_mode"))
        self.model_loader = self.init_model_loader()
        saved = self.model_loader.load_model(
            self.project_name,
            self.experiment_name,
            self.saved_experiment_timestamp,
            self.saved_model_dir,
            self.epoch_num,
            **self.loader_kwargs,
        )
        loop.model = self.model_loader.init_model(
            loop.model, used_data_parallel=self.used_data_parallel
        )
        if not self.ignore_saved_optimizer:
            loop.optimizer = self.model_loader.init_optimizer(loop.optimizer)
        if not self.ignore_saved_amp and getattr(loop, "use_amp", False):
            self.model_loader.init_amp(loop.amp_scaler)
        saved = saved if isinstance(saved, dict) else {}
        if isinstance(saved.get("epoch"), int):
            loop.epoch = saved["epoch"] + 1
        self._saved_order = {k: saved[k] for k in ("data_seed", "rng_states") if k in saved}

    def init_model_loader(self) -> Any:
        """The loader of ``cloud_save_mode``: S3 or GCS (download, then read), else local."""
        from scramjet.compat.aitoolbox.experiment.local_load.local_model_load import (
            PyTorchLocalModelLoader,
        )

        root = self.local_model_result_folder_path or "."
        local_class = self.custom_local_loader_class or PyTorchLocalModelLoader
        bucket = self.bucket_name or "model-result"  # AIToolbox's default bucket
        if self.cloud_save_mode not in S3_MODES + GCS_MODES:
            return local_class(root)
        if self.cloud_save_mode in S3_MODES:
            from scramjet.compat.aitoolbox.cloud.AWS.model_load import PyTorchS3ModelLoader

            loader: Any = PyTorchS3ModelLoader(root, bucket, self.cloud_dir_prefix or "")
        else:
            from scramjet.compat.aitoolbox.cloud.GoogleCloud.model_load import (
                PyTorchGoogleStorageModelLoader,
            )

            loader = PyTorchGoogleStorageModelLoader(root, bucket, self.cloud_dir_prefix or "")
        loader.local_model_loader = local_class(root)
        return loader

    def on_train_begin(self) -> None:
        """Restore the saved data order, RNG states and the scheduler callbacks' states."""
        self._restore_order()
        get_schedulers = getattr(self.train_loop_obj, "get_schedulers", None)
        if self.ignore_saved_schedulers or get_schedulers is None or self.model_loader is None:
            return
        self.model_loader.init_scheduler(get_schedulers(), ignore_saved=False)

    def _restore_order(self) -> None:
        """The saved run's data-order seed and (in one process) its RNG states.

        The next epoch then draws the batches and dropout masks that the saved run drew,
        whatever the new process seeded.
        """
        loop = self.train_loop_obj
        data_order = getattr(getattr(loop, "trainer", None), "data_order", None)
        if data_order is not None and "data_seed" in self._saved_order:
            data_order.load_state_dict({"seed": self._saved_order["data_seed"]})
        if "rng_states" in self._saved_order and not getattr(loop, "ddp_training_mode", False):
            set_rng_states(self._saved_order["rng_states"])
