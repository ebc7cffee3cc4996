"""``CallbacksHandler``: registers a ``TrainLoop``'s callbacks and calls their hooks in order.

A callback takes part in a hook only when its class overrides that hook, so a run calls
no empty methods. Callbacks run in increasing ``execution_order`` (ties keep the order in
which they were registered).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from scramjet.compat.aitoolbox.torchtrain.train_loop.train_loop import TrainLoop

__all__ = ["HOOKS", "CallbacksHandler"]

#: The hooks of an AIToolbox callback, in the order of :attr:`CallbacksHandler.registered_cbs`.
HOOKS: tuple[str, ...] = (
    "on_epoch_begin",
    "on_epoch_end",
    "on_train_begin",
    "on_train_end",
    "on_batch_begin",
    "on_batch_end",
    "on_after_gradient_update",
    "on_after_optimizer_step",
    "on_multiprocess_start",
    "on_after_batch_prediction",
)


def callback_types() -> tuple[type, ...]:
    """The classes a registered callback may be: AIToolbox-style ones and the core's."""
    from scramjet.callbacks.base import TrainerCallback
    from scramjet.compat.aitoolbox.callbacks import AbstractCallback as FlatCallback

    types: list[type] = [FlatCallback, TrainerCallback]
    try:
        from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import AbstractCallback
    except ImportError:
        pass
    else:
        types.append(AbstractCallback)
    return tuple(types)


def overrides(callback: Any, hook: str) -> bool:
    """Whether ``callback``'s class overrides ``hook`` of its root callback class."""
    method = getattr(type(callback), hook, None)
    if method is None or not callable(method):
        return False
    roots = [c for c in type(callback).__mro__ if hook in vars(c)]
    return len(roots) > 1 and method is not vars(roots[-1])[hook]


class CallbacksHandler:
    """The callbacks of one ``TrainLoop``, split by the hooks they implement.

    Args:
        train_loop_obj: the TrainLoop whose ``callbacks`` list this handler keeps.
    """

    def __init__(self, train_loop_obj: TrainLoop | None) -> None:
        self.train_loop_obj = train_loop_obj
        self.callbacks_cache: list[Any] = []
        self.registered_cbs: list[list[Any]] = [[] for _ in HOOKS]

    def __getattr__(self, name: str) -> list[Any]:
        # cbs_on_<hook>: the callbacks that run at <hook>, in order.
        if name.startswith("cbs_") and name[4:] in HOOKS:
            return self.registered_cbs[HOOKS.index(name[4:])]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ----------------------------------------------------------------- registration
    def register_callbacks(
        self,
        callbacks: Iterable[Any] | None,
        cache_callbacks: bool = False,
        print_callbacks: bool = False,
    ) -> None:
        """Register ``callbacks`` with the TrainLoop (or keep them for later with ``cache_callbacks``).

        Registration gives each callback the TrainLoop (``on_train_loop_registration``
        runs), adds it to ``train_loop.callbacks`` in execution order and to the hooks it
        implements. Cached callbacks are registered with the next non-cached call.
        """
        given = list(callbacks or [])
        if cache_callbacks:
            self.callbacks_cache += given
            return
        given, self.callbacks_cache = self.callbacks_cache + given, []
        self.enforce_callbacks_quality(given)
        loop = self._loop()
        # A callback passed to fit() again (a second fit) is registered once.
        given = [c for c in given if not any(c is r for r in loop.callbacks)]
        for callback in given:
            if hasattr(callback, "register_train_loop_object"):
                callback.register_train_loop_object(loop)
        loop.callbacks = sorted(loop.callbacks + given, key=_order)
        self.split_on_execution_position(loop.callbacks)
        if print_callbacks:
            self.print_registered_callback_names()

    def _loop(self) -> TrainLoop:
        if self.train_loop_obj is None:
            raise ValueError(
                "this CallbacksHandler has no TrainLoop; create it with CallbacksHandler(train_loop) "
                "or use train_loop.callbacks_handler."
            )
        return self.train_loop_obj

    def split_on_execution_position(
        self, callbacks: Iterable[Any], register_train_loop: bool = False
    ) -> None:
        """Put each callback in the lists of the hooks it implements, in execution order."""
        ordered = sorted(callbacks, key=_order)
        if register_train_loop:
            loop = self._loop()
            for callback in ordered:
                callback.register_train_loop_object(loop)
        self.registered_cbs = [[c for c in ordered if overrides(c, hook)] for hook in HOOKS]

    def should_enable_callback(self, callback: Any) -> bool:
        """Whether ``callback`` runs in this process (its ``device_idx_execution`` is this device's)."""
        wanted = getattr(callback, "device_idx_execution", None)
        index = self._loop().device.index
        return wanted is None or index is None or wanted == index

    def mp_filter_callbacks(self) -> None:
        """Keep only the callbacks meant for this process's device."""
        loop = self._loop()
        loop.callbacks = [c for c in loop.callbacks if self.should_enable_callback(c)]
        self.split_on_execution_position(loop.callbacks)

    def enforce_callbacks_quality(self, callbacks: Iterable[Any]) -> None:
        """Check each callback's type and that its ``device_idx_execution`` names a visible GPU.

        Raises:
            TypeError: not a callback.
            ValueError: ``device_idx_execution`` is not a visible GPU while training on GPU.
        """
        types = callback_types()
        for callback in callbacks:
            if not isinstance(callback, types):
                raise TypeError(
                    f"callbacks must be AbstractCallback (or scramjet TrainerCallback) instances; "
                    f"received {type(callback).__name__}. Subclass AbstractCallback."
                )
            wanted = getattr(callback, "device_idx_execution", None)
            loop = self.train_loop_obj
            on_gpu = loop is not None and loop.device.index is not None
            if wanted is not None and on_gpu and wanted >= torch.cuda.device_count():
                raise ValueError(
                    f"callback {getattr(callback, 'callback_name', type(callback).__name__)!r} "
                    f"has device_idx_execution={wanted}, but {torch.cuda.device_count()} GPU(s) "
                    f"are visible; pass an index below that, or None to run on every process."
                )

    def print_registered_callback_names(self) -> None:
        """Print the registered callbacks' names."""
        for callback in self._loop().callbacks:
            print(f"CALLBACK: {getattr(callback, 'callback_name', type(callback).__name__)}")

    # ----------------------------------------------------------------- execution
    def _run(self, hook: str, *args: Any) -> None:
        for callback in self.registered_cbs[HOOKS.index(hook)]:
            getattr(callback, hook)(*args)

    def execute_epoch_begin(self) -> None:
        """Run ``on_epoch_begin``."""
        self._run("on_epoch_begin")

    def execute_epoch_end(self) -> None:
        """Run ``on_epoch_end``."""
        self._run("on_epoch_end")

    def execute_train_begin(self) -> None:
        """Run ``on_train_begin``."""
        self._run("on_train_begin")

    def execute_train_end(self) -> None:
        """Run ``on_train_end``."""
        self._run("on_train_end")

    def execute_batch_begin(self) -> None:
        """Run ``on_batch_begin``."""
        self._run("on_batch_begin")

    def execute_batch_end(self) -> None:
        """Run ``on_batch_end``."""
        self._run("on_batch_end")

    def execute_gradient_update(self, optimizer_idx: int = 0) -> None:
        """Run ``on_after_gradient_update(optimizer_idx)`` (gradients ready, before the step)."""
        self._run("on_after_gradient_update", optimizer_idx)

    def execute_optimizer_step(self) -> None:
        """Run ``on_after_optimizer_step``."""
        self._run("on_after_optimizer_step")

    def execute_multiprocess_start(self) -> None:
        """Run ``on_multiprocess_start`` (in each process of a distributed run)."""
        self._run("on_multiprocess_start")

    def execute_after_batch_prediction(
        self, y_pred_batch: Any, y_test_batch: Any, metadata_batch: Any, dataset_info: Any
    ) -> None:
        """Run ``on_after_batch_prediction`` with one predicted batch."""
        self._run(
            "on_after_batch_prediction", y_pred_batch, y_test_batch, metadata_batch, dataset_info
        )

    def __str__(self) -> str:
        names = [getattr(c, "callback_name", type(c).__name__) for c in self._loop().callbacks]
        return f"CallbacksHandler({names})"

    def __len__(self) -> int:
        return len(self._loop().callbacks) if self.train_loop_obj is not None else 0


def _order(callback: Any) -> Any:
    return getattr(callback, "execution_order", 0)
