"""nebulgym's ``annotations.torch_annotations`` module path, for code that imports from it.

The decorators are the ones of :mod:`scramjet.compat.nebulgym`; only the path differs.
"""

from scramjet.compat.nebulgym import (
    accelerate_dataset,
    accelerate_model,
    patch_dataset,
    patch_torch_module,
)

__all__ = ["accelerate_dataset", "accelerate_model", "patch_dataset", "patch_torch_module"]
