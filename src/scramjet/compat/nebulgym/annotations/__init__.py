"""nebulgym's ``annotations`` package: the class decorators live in :mod:`.torch_annotations`."""

from scramjet.compat.nebulgym.annotations.torch_annotations import (
    accelerate_dataset,
    accelerate_model,
    patch_dataset,
    patch_torch_module,
)

__all__ = ["accelerate_dataset", "accelerate_model", "patch_dataset", "patch_torch_module"]
