"""The public API: each package's ``__all__``, pinned name by name.

Adding or removing a public name is a deliberate change: update the expected set here
in the same commit. A new public package must either get an entry in ``EXPECTED`` or be
listed in ``NOT_API`` with the reason.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest

import scramjet

EXPECTED: dict[str, set[str]] = {
    "scramjet": {
        "CheckpointManager",
        "CosineWarmupScheduler",
        "DEFAULT_CALLBACKS",
        "RunHistory",
        "StopTrainingError",
        "Trainer",
        "TrainerCallback",
        "TrainerPlaceholderValues",
        "WSDScheduler",
        "__version__",
        "seed_everything",
    },
    "scramjet.accel": {
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
    },
    "scramjet.accel.backends": {
        "BackendBuilder",
        "BuildContext",
        "ForwardFn",
        "available_backends",
        "get_builder",
        "register_backend",
        "unregister_backend",
    },
    "scramjet.callbacks": {
        "ALIASES",
        "CallbackError",
        "CallbackHandler",
        "ConvertSyncBatchNormCallback",
        "DEFAULT_CALLBACKS",
        "EarlyStoppingCallback",
        "Event",
        "LimitBatchesCallback",
        "LimitEvalStepsCallback",
        "LogMetricsCallback",
        "ModelEmaCallback",
        "MoveModulesToDeviceCallback",
        "PER_STEP_EVENTS",
        "PrintProgressCallback",
        "ProgressBarCallback",
        "SaveBestModelCallback",
        "SaveTrainingStateCallback",
        "StepBasedEvaluationCallback",
        "StopTrainingError",
        "TerminateOnNaNCallback",
        "TrainerCallback",
        "TrainingNaNError",
    },
    "scramjet.checkpoint": {
        "CheckpointError",
        "CheckpointInfo",
        "CheckpointManager",
        "CheckpointMismatchError",
        "CheckpointWriteError",
        "CorruptCheckpointError",
        "LoadResult",
        "RemoteCheckpointManager",
        "load_remote",
        "read_checkpoint",
        "write_checkpoint",
    },
    "scramjet.compat.aitoolbox.torchtrain": {
        "ModelWrap",
        "MultiLoss",
        "MultiOptimizer",
        "TTBasicModel",
        "TTDataParallel",
        "TTDistributedDataParallel",
        "TTModel",
        "TrainLoop",
        "TrainLoopCheckpoint",
        "TrainLoopCheckpointEndSave",
        "TrainLoopEndSave",
    },
    "scramjet.compat.aitoolbox.torchtrain.train_loop": {
        "TrainLoop",
        "TrainLoopCheckpoint",
        "TrainLoopCheckpointEndSave",
        "TrainLoopEndSave",
    },
    "scramjet.compat.aitoolbox": {
        "AbstractCallback",
        "AbstractResultPackage",
        "BasicDataset",
        "BinaryClassificationResultPackage",
        "ClassificationResultPackage",
        "EarlyStopping",
        "GradNormClip",
        "GradValueClip",
        "GradientStatsPrint",
        "MachineTranslationResultPackage",
        "ModelCheckpoint",
        "ModelTrainEndSave",
        "ModelTrainHistoryFileWriter",
        "ModelTrainHistoryPlot",
        "PerplexityResultPackage",
        "QuestionAnswerResultPackage",
        "RegressionResultPackage",
        "ListDataset",
        "ModelWrap",
        "MultiLoss",
        "MultiOptimizer",
        "TTBasicModel",
        "TTDataParallel",
        "TTDistributedDataParallel",
        "TTModel",
        "TTTrainer",
        "TensorBoardFullTracker",
        "TensorboardFullTracker",
        "TerminateOnNaN",
        "TextSummarizationResultPackage",
        "TrainLoop",
        "TrainLoopCheckpoint",
        "TrainLoopCheckpointEndSave",
        "TrainLoopEndSave",
    },
    "scramjet.compat.nebulae": {
        "Brighten",
        "CPU",
        "Comburant",
        "Contrast",
        "Craft",
        "Crop",
        "DashBoard",
        "Dense",
        "Engine",
        "Flip",
        "FuelGenerator",
        "GPU",
        "GPUtil",
        "Hue",
        "Law",
        "Multiverse",
        "Nozzle",
        "Prober",
        "Reshape",
        "Rotate",
        "Rudder",
        "Sample",
        "Saturate",
        "Tank",
        "TimeMachine",
        "autoPad",
        "coat",
        "dock",
        "shell",
    },
    "scramjet.compat.nebulae.astro": {
        "Craft",
        "Dense",
        "Law",
        "Nozzle",
        "Prober",
        "Reshape",
        "Rudder",
        "autoPad",
        "coat",
        "dock",
        "shell",
    },
    "scramjet.compat.nebulae.fuel": {
        "Blur",
        "Brighten",
        "Comburant",
        "Contrast",
        "Crop",
        "Flip",
        "FuelGenerator",
        "Hue",
        "Noise",
        "Resize",
        "Rotate",
        "Sample",
        "Saturate",
        "Tank",
        "depot",
        "farm",
    },
    "scramjet.compat.nebulgym.annotations": {
        "accelerate_dataset",
        "accelerate_model",
        "patch_dataset",
        "patch_torch_module",
    },
    "scramjet.compat.nebulgym.annotations.torch_annotations": {
        "accelerate_dataset",
        "accelerate_model",
        "patch_dataset",
        "patch_torch_module",
    },
    "scramjet.compat.nebulgym.decorators": {
        "NebulDataset",
        "TrainingLearner",
        "accelerate_dataset",
        "accelerate_model",
    },
    "scramjet.compat.nebulgym.decorators.torch_decorators": {
        "NebulDataset",
        "TrainingLearner",
        "accelerate_dataset",
        "accelerate_model",
    },
    "scramjet.compat.nebulgym": {
        "NebulDataset",
        "TrainingLearner",
        "accelerate_dataset",
        "accelerate_model",
        "patch_dataset",
        "patch_torch_module",
    },
    "scramjet.compat.pytorch_accelerated": {
        "DEFAULT_CALLBACKS",
        "Trainer",
        "TrainerPlaceholderValues",
        "TrainerWithTimmScheduler",
        "notebook_launcher",
    },
    "scramjet.compat.pytorch_accelerated.schedulers": {
        "CosineLrScheduler",
        "SchedulerBase",
        "SchedulerConfigError",
        "StatefulSchedulerBase",
        "WSDLrScheduler",
    },
    "scramjet.dashboard": {
        "Dashboard",
        "Snapshot",
        "StageView",
        "moving_average",
        "plain_lines",
        "render",
        "render_curve",
    },
    "scramjet.data": {
        "FORMAT_VERSION",
        "Manifest",
        "PackError",
        "PackFormatError",
        "PackReport",
        "PackedDataset",
        "ShardDownloadError",
        "ThreadedLoader",
        "pack",
    },
    "scramjet.metrics": {
        "BinaryResults",
        "BleuResults",
        "ClassificationResults",
        "CombinedResults",
        "MultiLabelResults",
        "PerplexityResults",
        "QAResults",
        "RegressionResults",
        "ResultPackage",
        "RougeResults",
        "lcs_length",
        "perplexity_from_loss",
        "rouge_l",
        "rouge_n",
        "tokenize",
    },
    "scramjet.runtime": {
        "DistEnv",
        "GpuInfo",
        "LaunchError",
        "NoGpuAvailableError",
        "PREEMPTED_EXIT_CODE",
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
    },
    "scramjet.tracking": {
        "CSVTracker",
        "Experiment",
        "MetricLog",
        "MetricRow",
        "ProcessRunStorage",
        "RunStorage",
        "StorageCheckError",
        "Tracker",
        "UploadReport",
        "build_plots",
        "build_report",
        "compare_runs",
        "list_runs",
        "read_metrics",
    },
    "scramjet.tracking.loggers": {
        "CSVTracker",
        "MetricRow",
        "Tracker",
        "flatten_params",
        "metric_series",
        "read_metrics",
    },
    "scramjet.trainer": {
        "MetricNotFoundError",
        "RunConfig",
        "RunHistory",
        "TrainState",
        "Trainer",
    },
}

#: Packages without an ``__all__`` of their own, and why.
NOT_API: dict[str, str] = {
    "scramjet.compat": "a folder for the compat layers, which have their own __all__",
    "scramjet.demo": "the runnable demo (python -m scramjet.demo), not a library API",
    "scramjet.compat.aitoolbox.torchtrain.callbacks": "AIToolbox's folder of callback modules; names live in the modules",
    "scramjet.compat.aitoolbox.torchtrain.data": "AIToolbox's folder of dataset modules; names live in the modules",
    "scramjet.compat.aitoolbox.torchtrain.train_loop.components": "AIToolbox's folder of TrainLoop part modules; names live in the modules",
    "scramjet.compat.aitoolbox.torchtrain.schedulers": "AIToolbox's folder of scheduler modules; names live in the modules",
    "scramjet.compat.aitoolbox.cloud": "AIToolbox's folder of cloud modules; names live in the modules",
    "scramjet.compat.aitoolbox.cloud.AWS": "AIToolbox's folder of S3 modules; names live in the modules",
    "scramjet.compat.aitoolbox.cloud.GoogleCloud": "AIToolbox's folder of Google Cloud Storage modules; names live in the modules",
    "scramjet.compat.aitoolbox.experiment": "AIToolbox's folder of experiment modules; names live in the modules",
    "scramjet.compat.aitoolbox.experiment.core_metrics": "AIToolbox's folder of metric modules; names live in the modules",
    "scramjet.compat.aitoolbox.experiment.local_load": "AIToolbox's folder of model loader modules; names live in the modules",
    "scramjet.compat.aitoolbox.experiment.local_save": "AIToolbox's folder of local saver modules; names live in the modules",
    "scramjet.compat.aitoolbox.experiment.result_package": "AIToolbox's folder of result package modules; names live in the modules",
    "scramjet.compat.aitoolbox.experiment.result_reporting": "AIToolbox's folder of report modules; names live in the modules",
    "scramjet.compat.aitoolbox.nlp": "AIToolbox's folder of NLP modules; names live in the modules",
    "scramjet.compat.aitoolbox.nlp.core": "AIToolbox's folder of text helper modules; names live in the modules",
    "scramjet.compat.aitoolbox.nlp.experiment_evaluation": "AIToolbox's folder of NLP metric modules; names live in the modules",
    "scramjet.compat.aitoolbox.utils": "AIToolbox's folder of helper modules; names live in the modules",
}


def _public_packages() -> set[str]:
    found = {"scramjet"}
    for info in pkgutil.walk_packages(scramjet.__path__, "scramjet."):
        if info.ispkg and not any(part.startswith("_") for part in info.name.split(".")):
            found.add(info.name)
    return found


def test_every_public_package_is_pinned_or_excused() -> None:
    packages = _public_packages()
    assert packages <= set(EXPECTED) | set(NOT_API), (
        "a new public package: pin its __all__ in EXPECTED or list it in NOT_API"
    )
    assert not set(EXPECTED) & set(NOT_API)
    # Pinned modules that are not packages: nebulgym's two module paths.
    assert set(EXPECTED) - packages == {
        "scramjet.compat.nebulgym.annotations.torch_annotations",
        "scramjet.compat.nebulgym.decorators.torch_decorators",
    }
    for name in NOT_API:
        assert name in packages
        assert not hasattr(importlib.import_module(name), "__all__"), f"{name} has an __all__ now"


@pytest.mark.parametrize("package", sorted(EXPECTED))
def test_all_is_pinned(package: str) -> None:
    exported = importlib.import_module(package).__all__
    assert isinstance(exported, list | tuple)
    assert set(exported) == EXPECTED[package], (
        f"{package}.__all__ changed: added {sorted(set(exported) - EXPECTED[package])}, "
        f"removed {sorted(EXPECTED[package] - set(exported))}"
    )


@pytest.mark.parametrize("package", sorted(EXPECTED))
def test_every_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing, f"{package}.__all__ names what the package does not have: {missing}"
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{package}.{name} is None"


@pytest.mark.parametrize("package", sorted(EXPECTED))
def test_no_private_names(package: str) -> None:
    exported = importlib.import_module(package).__all__
    assert [n for n in exported if n.startswith("_") and n != "__version__"] == []


def _isort_key(name: str) -> tuple[int, list[int | str]]:
    """ruff's isort-style order (RUF022): CONSTANTS, then Classes, then the rest, naturally."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return kind, [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


@pytest.mark.parametrize("package", sorted(EXPECTED))
def test_all_has_no_duplicates_and_is_sorted(package: str) -> None:
    exported = list(importlib.import_module(package).__all__)
    assert len(exported) == len(set(exported)), f"duplicates in {package}.__all__"
    if "__version__" in exported:
        assert exported[0] == "__version__", "__version__ comes first"
        exported = exported[1:]
    # The repo uses both plain sorting and ruff's isort-style sorting (RUF022 --fix).
    assert exported in (sorted(exported), sorted(exported, key=_isort_key)), (
        f"{package}.__all__ is not sorted; sorted it reads {sorted(exported)}"
    )
