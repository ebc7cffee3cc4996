"""``ModelPredictionStore``: predictions kept until the model changes (the iteration moves on)."""

from __future__ import annotations

from typing import Any

__all__ = ["ModelPredictionStore"]


class ModelPredictionStore:
    """Caches ``(y_pred, y_true, metadata)`` and losses per data set for one iteration.

    Args:
        auto_purge: inserting for a newer iteration index empties the store first.
    """

    def __init__(self, auto_purge: bool = False) -> None:
        self.auto_purge = auto_purge
        self.prediction_store: dict[str, Any] = {"iteration_idx": -1}

    def _insert(self, key: str, value: Any, iteration_idx: int, force: bool = False) -> None:
        self.auto_purge_check(iteration_idx)
        if key in self.prediction_store and not force:
            raise ValueError(
                f"the store already holds {key!r} for iteration {self.prediction_store['iteration_idx']}; "
                f"expected each result once per iteration. Read it with the get_* method instead."
            )
        self.prediction_store[key] = value

    def _get(self, key: str, iteration_idx: int) -> Any:
        if not self._has(key, iteration_idx):
            raise ValueError(
                f"the store holds no {key!r} for iteration {iteration_idx} (it holds "
                f"{sorted(k for k in self.prediction_store if k != 'iteration_idx')} for iteration "
                f"{self.prediction_store['iteration_idx']}); check has_* before reading."
            )
        return self.prediction_store[key]

    def _has(self, key: str, iteration_idx: int) -> bool:
        return (
            key in self.prediction_store and self.prediction_store["iteration_idx"] == iteration_idx
        )

    def auto_purge_check(self, iteration_idx: int) -> None:
        """With ``auto_purge``, empty the store when ``iteration_idx`` is a newer one."""
        if self.auto_purge and iteration_idx != self.prediction_store["iteration_idx"]:
            self.purge_prediction_store(iteration_idx)

    def purge_prediction_store(self, iteration_idx: int) -> None:
        """Empty the store and mark it as holding results of ``iteration_idx``."""
        self.prediction_store = {"iteration_idx": iteration_idx}

    def insert_train_predictions(
        self, predictions: Any, iteration_idx: int, force: bool = False
    ) -> None:
        """Store the training-set predictions of ``iteration_idx``."""
        self._insert("train_pred", predictions, iteration_idx, force)

    def insert_val_predictions(
        self, predictions: Any, iteration_idx: int, force: bool = False
    ) -> None:
        """Store the validation-set predictions of ``iteration_idx``."""
        self._insert("val_pred", predictions, iteration_idx, force)

    def insert_test_predictions(
        self, predictions: Any, iteration_idx: int, force: bool = False
    ) -> None:
        """Store the test-set predictions of ``iteration_idx``."""
        self._insert("test_pred", predictions, iteration_idx, force)

    def get_train_predictions(self, iteration_idx: int) -> Any:
        """The stored training-set predictions of ``iteration_idx``."""
        return self._get("train_pred", iteration_idx)

    def get_val_predictions(self, iteration_idx: int) -> Any:
        """The stored validation-set predictions of ``iteration_idx``."""
        return self._get("val_pred", iteration_idx)

    def get_test_predictions(self, iteration_idx: int) -> Any:
        """The stored test-set predictions of ``iteration_idx``."""
        return self._get("test_pred", iteration_idx)

    def has_train_predictions(self, iteration_idx: int) -> bool:
        """Whether training-set predictions of ``iteration_idx`` are stored."""
        return self._has("train_pred", iteration_idx)

    def has_val_predictions(self, iteration_idx: int) -> bool:
        """Whether validation-set predictions of ``iteration_idx`` are stored."""
        return self._has("val_pred", iteration_idx)

    def has_test_predictions(self, iteration_idx: int) -> bool:
        """Whether test-set predictions of ``iteration_idx`` are stored."""
        return self._has("test_pred", iteration_idx)

    def insert_train_loss(self, loss: Any, iteration_idx: int, force: bool = False) -> None:
        """Store the training-set loss of ``iteration_idx``."""
        self._insert("train_loss", loss, iteration_idx, force)

    def insert_val_loss(self, loss: Any, iteration_idx: int, force: bool = False) -> None:
        """Store the validation-set loss of ``iteration_idx``."""
        self._insert("val_loss", loss, iteration_idx, force)

    def insert_test_loss(self, loss: Any, iteration_idx: int, force: bool = False) -> None:
        """Store the test-set loss of ``iteration_idx``."""
        self._insert("test_loss", loss, iteration_idx, force)

    def get_train_loss(self, iteration_idx: int) -> Any:
        """The stored training-set loss of ``iteration_idx``."""
        return self._get("train_loss", iteration_idx)

    def get_val_loss(self, iteration_idx: int) -> Any:
        """The stored validation-set loss of ``iteration_idx``."""
        return self._get("val_loss", iteration_idx)

    def get_test_loss(self, iteration_idx: int) -> Any:
        """The stored test-set loss of ``iteration_idx``."""
        return self._get("test_loss", iteration_idx)

    def has_train_loss(self, iteration_idx: int) -> bool:
        """Whether the training-set loss of ``iteration_idx`` is stored."""
        return self._has("train_loss", iteration_idx)

    def has_val_loss(self, iteration_idx: int) -> bool:
        """Whether the validation-set loss of ``iteration_idx`` is stored."""
        return self._has("val_loss", iteration_idx)

    def has_test_loss(self, iteration_idx: int) -> bool:
        """Whether the test-set loss of ``iteration_idx`` is stored."""
        return self._has("test_loss", iteration_idx)
