"""The check every ``set_start`` (a mid-epoch resume position) goes through.

A resume position is a whole number of items (indices, samples or batches) already
consumed in the epoch. ``0`` reads the whole epoch; a position at or past the epoch's end
reads none of it (the Trainer counts whole batches, so a checkpoint saved after an
epoch's last, partial batch gives a position a little past the end). A negative number,
a fraction or a bool is a wrong position, not one to clamp or round: it would silently
repeat or drop data, so it raises.
"""

from __future__ import annotations

import numbers


def check_start(start: object, unit: str = "indices") -> int:
    """``start`` as an ``int`` when it is a whole number ``>= 0``; ``TypeError`` or
    ``ValueError`` otherwise, saying what was received and what is valid."""
    if isinstance(start, bool) or not isinstance(start, numbers.Integral):
        raise TypeError(
            f"set_start takes the whole number of {unit} already consumed in the epoch "
            f"(an int >= 0), got {start!r} ({type(start).__name__}). Pass the int "
            f"position a resume saved, e.g. set_start(int(position))."
        )
    value = int(start)
    if value < 0:
        raise ValueError(
            f"set_start got {value}, which is not a position in an epoch: it takes the "
            f"number of {unit} already consumed, >= 0 (0 reads the whole epoch, the "
            f"epoch's length or more reads none of it). Pass the position the interrupted "
            f"run saved."
        )
    return value
