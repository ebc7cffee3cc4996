"""``log()``'s PNG plots of metrics and stages named in any script: drawn with an installed
font that has the glyphs, else with ``?`` in their place and one warning naming the metric,
never matplotlib's warning per glyph per plot."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

from matplotlib import font_manager
from matplotlib.ft2font import FT2Font

from scramjet.dashboard import Dashboard


def _log(tmp_path: Path, names: list[str], stage: str) -> list[str]:
    board = Dashboard(log_path=str(tmp_path), file=io.StringIO(), force_terminal=False)
    for mile in range(3):
        board.gauge({n: 0.5 + mile for n in names}, mile, 0, 3, stage)
    board.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        board.log(tachograph=False)
    return [str(w.message) for w in caught]


def test_glyphs_no_font_has_give_one_warning_naming_the_metric(tmp_path: Path) -> None:
    messages = _log(tmp_path, ["損失", "acc🚀"], stage="验证")
    assert not [m for m in messages if "missing from font" in m], messages
    assert len([m for m in messages if "'損失'" in m]) == 1, messages
    assert len([m for m in messages if "'acc🚀'" in m]) == 1, messages
    assert len(messages) == 2, messages
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert len(pngs) == 2 and all((tmp_path / p).read_bytes()[:4] == b"\x89PNG" for p in pngs)


def test_a_glyph_another_installed_font_has_is_drawn_with_it(tmp_path: Path) -> None:
    # A character the default font lacks and another installed font has (STIX ships
    # with matplotlib): no warning at all.
    default = set(FT2Font(font_manager.findfont(font_manager.FontProperties())).get_charmap())
    others = {  # the file each installed family is drawn with
        font_manager.findfont(font_manager.FontProperties(family=f.name))
        for f in font_manager.fontManager.ttflist
        if not f.name.startswith("Last Resort")
    }
    extra = sorted({c for path in others for c in FT2Font(path).get_charmap()} - default)
    glyph = next(chr(c) for c in extra if chr(c).isalpha())
    messages = _log(tmp_path, [f"loss_{glyph}"], stage=f"train_{glyph}")
    assert messages == [], messages


def test_names_the_default_font_has_give_no_warning(tmp_path: Path) -> None:
    assert _log(tmp_path, ["loss", "accuracy é"], stage="train") == []


def test_looking_for_fonts_logs_nothing(tmp_path: Path) -> None:
    # matplotlib's findfont logs a line per family without a regular face; a fresh
    # process shows whether looking for a fallback font wrote any.
    code = textwrap.dedent(
        f"""
        import io
        from scramjet.dashboard import Dashboard
        board = Dashboard(log_path={str(tmp_path)!r}, file=io.StringIO(), force_terminal=False)
        board.gauge({{"損失 loss": 0.5, "a\\\\nb": 1.0}}, 0, 0, 1, "验证")
        board.close()
        board.log(tachograph=False)
        """
    )
    done = subprocess.run(
        [sys.executable, "-W", "ignore::RuntimeWarning", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
