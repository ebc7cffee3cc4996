"""Runs the ``Example:`` sections of every public module's docstrings as doctests."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import scramjet

# Modules whose examples need optional services or long runs are listed here with why.
SKIP: dict[str, str] = {}


def _modules() -> list[str]:
    names = ["scramjet"]
    for info in pkgutil.walk_packages(scramjet.__path__, "scramjet."):
        if not info.name.rsplit(".", 1)[-1].startswith("_"):
            names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str, tmp_path, monkeypatch) -> None:
    if name in SKIP:
        pytest.skip(SKIP[name])
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"
