"""Freezing and unfreezing a model's layer groups for fine-tuning.

A model's top-level children are its *layer groups*, numbered in order (negative indices
count from the end; a model inside a ``DistributedDataParallel`` or ``torch.compile``
wrapper is grouped by its own children); every module inside a group that holds
parameters of its own, or has no children, is a *layer*. Batch-norm layers stay trainable unless
``freeze_batch_norms=True`` (fine-tuning usually keeps their statistics adapting).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from torch import nn

from scramjet.checkpoint.payload import unwrap


def _module_is_batch_norm(module: nn.Module) -> bool:
    return isinstance(module, nn.modules.batchnorm._BatchNorm)


@dataclass
class Layer:
    """One layer: ``layer_group_idx`` is its group's index counted from the start and
    from the end, ``(g, g - number_of_groups)``, as pytorch-accelerated gives it.

    ``is_frozen`` follows the layer's own parameters (none requires a gradient), also when
    they were frozen or thawed outside the freezer; a layer without parameters keeps the
    state the freezer last gave it.
    """

    layer_group_idx: tuple[int, int]
    module: nn.Module
    is_frozen: bool = False


@dataclass
class LayerGroup:
    """One top-level child of the model: ``layer_group_idx`` is ``(g, g - number_of_groups)``
    (its index from the start and from the end), and ``name`` its attribute name."""

    layer_group_idx: tuple[int, int]
    module: nn.Module
    layers: list[Layer]
    name: str = ""

    @property
    def is_frozen(self) -> bool:
        """Every layer with parameters is frozen."""
        held = [layer for layer in self.layers if any(True for _ in _own_params(layer.module))]
        return bool(held) and all(layer.is_frozen for layer in held)


def _own_params(module: nn.Module) -> Iterator[nn.Parameter]:
    return module.parameters(recurse=False)


class ModelFreezer:
    """Freezes and unfreezes ranges of a model's layer groups.

    Args:
        model: the model (its top-level children are the groups).
        freeze_batch_norms: freeze batch-norm layers too.

    Example:
        >>> model = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1))
        >>> freezer = ModelFreezer(model)
        >>> freezer.freeze(from_index=0, to_index=-2)
        >>> [p.requires_grad for p in model.parameters()]
        [False, False, True, True]
        >>> sorted(freezer.unfreeze(from_index=0, to_index=-1))
        [0]
    """

    def __init__(self, model: nn.Module, freeze_batch_norms: bool = False) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be an nn.Module; received {type(model).__name__}.")
        # The groups are the user's model's children, also when it is given inside its
        # DistributedDataParallel or torch.compile wrapper (trainer.model in a run).
        model = unwrap(model)
        self.model = model
        self.freeze_batch_norms = freeze_batch_norms
        self._groups: list[LayerGroup] = []
        children = list(model.named_children())
        for g, (name, child) in enumerate(children):
            idx = (g, g - len(children))  # from the start and from the end
            layers = [
                Layer(idx, m)
                for m in child.modules()
                if next(iter(_own_params(m)), None) is not None or not list(m.children())
            ]
            self._groups.append(LayerGroup(idx, child, layers, name))
        if not self._groups:
            raise ValueError(
                f"{type(model).__name__} has no child modules to group; ModelFreezer needs a "
                f"model built from submodules."
            )

    def get_layer_groups(self) -> list[LayerGroup]:
        """The layer groups, in order."""
        self._refresh()
        return list(self._groups)

    def get_layers(self) -> list[Layer]:
        """Every layer of every group, in order."""
        self._refresh()
        return [layer for group in self._groups for layer in group.layers]

    def _refresh(self) -> None:
        # A layer's state is its parameters' (requires_grad set by hand counts too), so
        # unfreeze() returns every parameter it thaws.
        for group in self._groups:
            for layer in group.layers:
                grads = [p.requires_grad for p in _own_params(layer.module)]
                if grads:
                    layer.is_frozen = not any(grads)

    def get_trainable_parameters(self) -> list[nn.Parameter]:
        """The parameters that currently require gradients."""
        return [p for p in self.model.parameters() if p.requires_grad]

    def _convert_idxs(self, from_idx: int, to_idx: int) -> tuple[int, int]:
        n = len(self._groups)
        for idx in (from_idx, to_idx):
            if not -n <= idx < n:
                raise IndexError(f"layer group index {idx} is out of range for {n} groups.")
        a, b = from_idx % n, to_idx % n
        return (a, b) if a <= b else (b, a)

    def freeze(
        self, from_index: int = 0, to_index: int = -2, set_modules_as_eval: bool = False
    ) -> None:
        """Freeze groups ``from_index`` to ``to_index`` (inclusive; by default all but the last)."""
        self._set(from_index, to_index, frozen=True, set_eval=set_modules_as_eval)

    def unfreeze(
        self, from_index: int = -1, to_index: int = 0, set_modules_as_training: bool = True
    ) -> dict[int, dict[str, Any]]:
        """Unfreeze groups in the range; returns ``{group: {"params": [...]}}`` of what thawed.

        Each entry can go to ``optimizer.add_param_group`` when the optimizer was built
        over the trainable parameters only.
        """
        return self._set(from_index, to_index, frozen=False, set_eval=not set_modules_as_training)

    def _set(
        self, from_index: int, to_index: int, *, frozen: bool, set_eval: bool
    ) -> dict[int, dict[str, Any]]:
        start, end = self._convert_idxs(from_index, to_index)
        self._refresh()
        changed: dict[int, dict[str, Any]] = {}
        for group in self._groups[start : end + 1]:
            params: list[nn.Parameter] = []
            for layer in group.layers:
                if frozen and _module_is_batch_norm(layer.module) and not self.freeze_batch_norms:
                    continue
                # Each parameter whose state changes (also one of a partly frozen layer).
                params.extend(p for p in _own_params(layer.module) if p.requires_grad == frozen)
                for p in _own_params(layer.module):
                    p.requires_grad_(not frozen)
                layer.is_frozen = frozen
                if frozen == set_eval:
                    layer.module.train(not frozen)
            if params:
                changed[group.layer_group_idx[0]] = {"params": params}
        return changed


__all__ = ["Layer", "LayerGroup", "ModelFreezer"]
