"""Fonts of ``log()``'s PNG plots: names in any script drawn without a warning per glyph.

matplotlib draws with one default font (DejaVu Sans) and warns once per missing glyph per
text drawn: a metric named ``損失`` gave several warnings per plot on every ``log()``.
:func:`plot_fonts` picks, for the texts of one plot, the installed fonts that have their
glyphs (matplotlib falls back from one family to the next, glyph by glyph); a glyph that
no installed font has is drawn as ``?``, with one ``RuntimeWarning`` naming the metric.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from functools import cache, lru_cache
from typing import Any

__all__ = ["plot_fonts"]


@cache
def _charmap(path: str) -> frozenset[int]:
    """The code points a font file has glyphs for."""
    from matplotlib.ft2font import FT2Font

    try:
        return frozenset(FT2Font(path).get_charmap())
    except (OSError, RuntimeError, ValueError):  # an unreadable font has no glyphs
        return frozenset()


@lru_cache(maxsize=1)
def _default() -> tuple[str, str]:
    """``(family, path)`` of the font matplotlib draws text with by default."""
    from matplotlib import font_manager

    path = font_manager.findfont(font_manager.FontProperties())
    return font_manager.get_font(path).family_name, path


@lru_cache(maxsize=1)
def _others() -> tuple[tuple[str, str], ...]:
    """``(family, path)`` of each other installed family: its regular face, the one
    matplotlib draws the family with (a bold face's glyphs are never counted).

    Read from matplotlib's font list, not ``findfont`` (which logs a line per family
    without a regular face). matplotlib's "Last Resort" font draws every code point as a
    box; it is left out, so a glyph no real font has becomes ``?`` and a warning.
    """
    from matplotlib import font_manager

    def distance(entry: Any) -> tuple[bool, float, bool]:
        weight = font_manager.weight_dict.get(entry.weight, entry.weight)
        weight = weight if isinstance(weight, int | float) else 400
        return entry.style != "normal", abs(weight - 400), entry.stretch != "normal"

    best: dict[str, Any] = {}
    for entry in font_manager.fontManager.ttflist:
        if entry.name == _default()[0] or entry.name.startswith("Last Resort"):
            continue
        if entry.name not in best or distance(entry) < distance(best[entry.name]):
            best[entry.name] = entry
    return tuple((name, best[name].fname) for name in sorted(best))


def plot_fonts(metric: str, texts: Iterable[str]) -> tuple[list[str], dict[str, str]]:
    """The font families to draw ``texts`` with, and each text as it is drawn.

    Args:
        metric: The plot's metric, named in the warning.
        texts: Every text of the plot (title, axis label, legend labels).

    Returns:
        ``(families, drawn)``: the default family then the fallbacks that hold glyphs it
        lacks; ``{text: text with each glyph no installed font has replaced by '?'}``.

    Example:
        >>> families, drawn = plot_fonts("loss", ["loss", "train"])
        >>> len(families), drawn["train"]
        (1, 'train')
    """
    texts = list(texts)
    family, path = _default()
    missing = {ord(c) for text in texts for c in text if not c.isspace()} - _charmap(path)
    families = [family]
    for name, other in _others() if missing else ():
        found = missing & _charmap(other)
        if found:
            families.append(name)
            missing -= found
    if missing:
        glyphs = "".join(chr(c) for c in sorted(missing))
        warnings.warn(
            f"Dashboard.log(): no installed font has the glyphs {glyphs!r} of metric "
            f"{metric!r} or its stages; its plot shows '?' in their place (the CSV keeps "
            f"the names). Install a font that has them (e.g. Noto Sans CJK, Noto Emoji) to "
            f"see them drawn.",
            RuntimeWarning,
            stacklevel=4,
        )
    drawn = {text: "".join("?" if ord(c) in missing else c for c in text) for text in texts}
    return families, drawn
