"""nebulgym's ``decorators`` package: the class decorators live in :mod:`.torch_decorators`."""

from scramjet.compat.nebulgym.decorators.torch_decorators import (
    NebulDataset,
    TrainingLearner,
    accelerate_dataset,
    accelerate_model,
)

__all__ = ["NebulDataset", "TrainingLearner", "accelerate_dataset", "accelerate_model"]
