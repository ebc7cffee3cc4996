"""``MultiLoss`` and ``MultiOptimizer``: several losses, each backpropagated for its own optimizer."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = ["MultiLoss", "MultiOptimizer"]


class MultiLoss:
    """Named losses; ``backward(optimizer_idx, ...)`` backpropagates the loss of that optimizer.

    Args:
        loss_dict: loss name → loss.
        loss_optimizer_map: loss name → optimizer index (default: the dict's order).
        retain_graph_until_last: keep the graph for every backward but the last, so losses
            sharing a graph can all be backpropagated.
    """

    def __init__(
        self,
        loss_dict: Mapping[str, Any],
        loss_optimizer_map: Mapping[str, int] | None = None,
        retain_graph_until_last: bool = True,
    ) -> None:
        self.loss_dict = dict(loss_dict)
        given = loss_optimizer_map or {name: i for i, name in enumerate(self.loss_dict)}
        if set(given) != set(self.loss_dict):
            raise ValueError(
                f"loss_optimizer_map must name the same losses as loss_dict; received "
                f"{sorted(given)} for losses {sorted(self.loss_dict)}."
            )
        self.optimizer_loss_map = {idx: name for name, idx in given.items()}
        self.retain_graph_until_last = retain_graph_until_last
        self.loss_backward_remaining = len(self.loss_dict)

    def backward(self, optimizer_idx: int, iteration: int, amp_grad_scaler: Any) -> None:
        """Backpropagate the loss of ``optimizer_idx`` (scaled by ``amp_grad_scaler``)."""
        loss = self.loss_dict[self.optimizer_loss_map[optimizer_idx]]
        retain = self.retain_graph_until_last and self.loss_backward_remaining > 1
        self.loss_backward_remaining -= 1
        if amp_grad_scaler is not None and amp_grad_scaler.is_enabled():
            loss = amp_grad_scaler.scale(loss)
        loss.backward(retain_graph=retain)

    def item(self) -> dict[str, Any]:
        """Each loss's ``item()``."""
        return {name: loss.item() for name, loss in self.loss_dict.items()}

    def detach(self) -> MultiLoss:
        """The losses detached from the graph."""
        return MultiLoss(
            {k: v.detach() for k, v in self.loss_dict.items()},
            {name: idx for idx, name in self.optimizer_loss_map.items()},
            self.retain_graph_until_last,
        )

    def __truediv__(self, grad_accumulation: float) -> MultiLoss:
        self.loss_dict = {k: v / grad_accumulation for k, v in self.loss_dict.items()}
        return self

    def __len__(self) -> int:
        return len(self.loss_dict)


class MultiOptimizer:
    """Several optimizers stepped and zeroed by index (``TrainLoop`` steps each once per update)."""

    def __init__(self, optimizer_list: Sequence[Any]) -> None:
        self.optimizer_list = list(optimizer_list)

    def step(self, optimizer_idx: int, iteration: int, amp_grad_scaler: Any) -> None:
        """Step optimizer ``optimizer_idx`` (through ``amp_grad_scaler`` when it is enabled)."""
        optimizer = self.optimizer_list[optimizer_idx]
        if amp_grad_scaler is not None and amp_grad_scaler.is_enabled():
            amp_grad_scaler.step(optimizer)
        else:
            optimizer.step()

    def zero_grad(self, optimizer_idx: int, iteration: int) -> None:
        """Zero the gradients of optimizer ``optimizer_idx``."""
        self.optimizer_list[optimizer_idx].zero_grad()

    def state_dict(self) -> list[Any]:
        """Each optimizer's state."""
        return [o.state_dict() for o in self.optimizer_list]

    def load_state_dict(self, state_dict_list: Sequence[Any]) -> None:
        """Restore each optimizer's state (as :meth:`state_dict` returned it)."""
        if len(state_dict_list) != len(self.optimizer_list):
            raise ValueError(
                f"expected {len(self.optimizer_list)} optimizer states (one per optimizer); "
                f"received {len(state_dict_list)}."
            )
        for optimizer, state in zip(self.optimizer_list, state_dict_list, strict=True):
            optimizer.load_state_dict(state)

    def __len__(self) -> int:
        return len(self.optimizer_list)

    def __getitem__(self, idx: int) -> Any:
        return self.optimizer_list[idx]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.optimizer_list)
