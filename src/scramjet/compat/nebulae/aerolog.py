"""nebulae's Aerolog name ``DashBoard`` over :class:`scramjet.dashboard.Dashboard`."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from typing import Any

from scramjet.dashboard import Dashboard
from scramjet.dashboard._values import integral
from scramjet.runtime.distributed import is_main_process

__all__ = ["DashBoard"]

MODES = ("raw", "percent", "tailor", "inviz")
_EXAMPLE = "{'acc': ('.2f', 'percent'), 'loss': ('.3f', 'raw')}"


def _number_spec(name: str, spec: Any, form: Any) -> str | None:
    """nebulae's ``'.3f'`` (it formats with ``'%-' + form``) as a ``format()`` spec."""
    if form is None:
        return None
    text = str(form).lstrip("%").lstrip("-") if isinstance(form, str) else None
    try:
        format(0.5, text or "")
    except (TypeError, ValueError):
        raise ValueError(
            f"format[{name!r}] = {spec!r}: {form!r} is not a number format; use a spec such "
            f"as '.3f', '.2e' or '.1%', e.g. {_EXAMPLE}."
        ) from None
    return text


def convert_format(
    fmt: Mapping[str, Any] | None,
) -> tuple[dict[str, tuple[str, Any]], dict[str, Callable[..., Any]]]:
    """nebulae's ``{metric: (form, mode)}`` as the Dashboard's ``{metric: (mode, arg)}``.

    Both orders are accepted (``('.3f', 'raw')`` as in nebulae, ``('raw', '.3f')`` as in
    :class:`scramjet.dashboard.Dashboard`), and a bare mode (``'raw'``).

    Returns:
        The Dashboard's format and, for ``inviz`` metrics, the functions to call.

    Example:
        >>> convert_format({"loss": (".3f", "raw"), "acc": ("percent", ".1f")})[0]
        {'loss': ('raw', '.3f'), 'acc': ('percent', '.1f')}
    """
    out: dict[str, tuple[str, Any]] = {}
    inviz: dict[str, Callable[..., Any]] = {}
    if fmt is not None and not isinstance(fmt, Mapping):
        raise TypeError(
            f"format must be a dict {{metric: (form, mode)}}; received {fmt!r} "
            f"({type(fmt).__name__}), e.g. {_EXAMPLE}."
        )
    for name, spec in (fmt or {}).items():
        items: Any = (spec, None) if isinstance(spec, str) else spec
        if not isinstance(items, tuple | list) or len(items) != 2:
            raise ValueError(
                f"format[{name!r}] = {spec!r}: expected a pair (form, mode), e.g. {_EXAMPLE}."
            )
        first, second = items
        if isinstance(second, str) and second in MODES:
            form, mode = first, second
        elif isinstance(first, str) and first in MODES:
            mode, form = first, second
        else:
            raise ValueError(
                f"format[{name!r}] = {spec!r}: no display mode in it; the modes are "
                f"{', '.join(MODES)} (nebulae's four), e.g. {_EXAMPLE}."
            )
        if mode in ("tailor", "inviz") and not callable(form):
            raise TypeError(
                f"format[{name!r}] = {spec!r}: mode {mode!r} needs a function as its form "
                f"(tailor: value -> str; inviz: called with (stage, epoch, mile, mpe, value))."
            )
        if mode == "inviz":
            inviz[str(name)] = form
            out[str(name)] = ("inviz", None)
        elif mode == "tailor":
            out[str(name)] = ("tailor", form)
        else:
            out[str(name)] = (mode, _number_spec(str(name), spec, form))
    return out, inviz


class DashBoard(Dashboard):
    """nebulae's ``DashBoard`` over :class:`scramjet.dashboard.Dashboard`.

    Same arguments, ``gauge(entry, mile, epoch, mpe, stage, interval=1, duration=None)``
    and ``log(gauge=True, tachograph=True, record=None)``, with nebulae's meanings:

    - ``format={metric: (form, mode)}``: ``('.3f', 'raw')``, ``('.1f', 'percent')``
      (value x 100 followed by ``%``), ``(fn, 'tailor')`` (``fn(value) -> str``) or
      ``(fn, 'inviz')`` (not shown; ``fn(stage, epoch, mile, mpe, value)`` is called on
      every ``gauge()``, epoch and mile counted from 1 as nebulae does).
    - ``gauge(interval=N)``: off a terminal, a line is printed every ``N`` calls
      (``(mile + 1) % N == 0``) and at the end of each epoch. On a terminal the live view
      redraws on its timer and always shows the latest values.

    Differences from nebulae: the screen refreshes on a timer (never per step), plots
    are PNG (not JPG), off a terminal it prints plain lines, and only rank 0 draws or
    writes.

    Example:
        >>> import io
        >>> out = io.StringIO()
        >>> db = DashBoard(log_path="./aerolog", window=5, divisor=10, span=30,
        ...                format={"loss": (".3f", "raw")}, file=out, show_memory=False)
        >>> for mile in range(4):
        ...     db.gauge({"loss": 0.5}, mile=mile, epoch=0, mpe=100, stage="train", interval=2)
        >>> [line.split(" | ")[0] for line in out.getvalue().splitlines()]
        ['train epoch 1 2/100', 'train epoch 1 4/100']
        >>> db.close()
    """

    def __init__(
        self,
        log_path: str = "./aerolog",
        window: int = 1,
        divisor: int = 10,
        span: int = 30,
        format: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        converted, self._inviz = convert_format(format)
        super().__init__(log_path, window, divisor, span, converted, **kwargs)

    def gauge(
        self,
        entry: Mapping[str, Any],
        mile: int,
        epoch: int,
        mpe: int,
        stage: str,
        interval: int = 1,
        duration: float | None = None,
        *,
        samples: int | None = None,
    ) -> None:
        """Record every step (see :meth:`Dashboard.gauge`), as nebulae did; off a terminal,
        print every ``interval`` calls (``interval`` thins the printed lines only)."""
        if not integral(interval) or interval < 1:  # NumPy integers too, as Dashboard takes
            raise ValueError(f"interval must be an int >= 1; received {interval!r}.")
        interval = int(interval)
        # An inviz value that is not one number (an image, a batch of masks) is its
        # function's to show: recording it would write a column and a plot of NaN.
        recorded = {k: v for k, v in entry.items() if k not in self._inviz or _one_number(v)}
        super().gauge(recorded, mile, epoch, mpe, stage, 1, duration, samples=samples)
        if not is_main_process():
            return
        for name, fn in self._inviz.items():
            if name in entry:
                fn(stage, epoch + 1, mile + 1, mpe, entry[name])
        # The end of an epoch prints its line already (Dashboard.gauge).
        if (mile + 1) % interval == 0 and mile + 1 < mpe and self._prints_plain:
            self._print_plain([stage])


def _one_number(value: Any) -> bool:
    """Whether ``value`` is one real number (a Python number, or a tensor or array of
    one element)."""
    if isinstance(value, numbers.Real):
        return True
    size = getattr(value, "size", None)
    count = value.numel() if callable(getattr(value, "numel", None)) else size
    return isinstance(count, int) and count == 1 and getattr(value, "dtype", None) is not None
