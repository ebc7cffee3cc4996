"""nebulgym's ``decorators.torch_decorators`` module path, for code that imports from it.

The names are the ones of :mod:`scramjet.compat.nebulgym`; only the path differs.
"""

from scramjet.compat.nebulgym import (
    NebulDataset,
    TrainingLearner,
    accelerate_dataset,
    accelerate_model,
)

__all__ = ["NebulDataset", "TrainingLearner", "accelerate_dataset", "accelerate_model"]
