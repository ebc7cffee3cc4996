"""Claims the README and docs make about names and files, checked against the code."""

from __future__ import annotations

import re
from pathlib import Path

from scramjet import Trainer
from scramjet.callbacks import Event

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "DEVELOPERS.md"]
DOC_FILES += sorted((ROOT / "docs").glob("*.md"))
PEER_PATHS = {"bin/AWS"}  # AIToolbox's folder, named in the "Coming from" tables


def _readme_paragraph(start: str) -> str:
    text = (ROOT / "README.md").read_text()
    begin = text.index(start)
    return text[begin : text.index("\n\n", begin)]


def test_readme_event_list_is_exactly_the_trainer_events() -> None:
    paragraph = _readme_paragraph("Events: `on_init_end`")
    listed = paragraph.split("pytorch-accelerated's README names")[0]
    names = set(re.findall(r"`(on_\w+)`", listed))
    assert names == {event.value for event in Event}


def test_every_hook_the_readme_lists_is_a_trainer_method() -> None:
    paragraph = _readme_paragraph("**Change how a step is computed**")
    hooks = set(re.findall(r"`([a-z_]+)`", paragraph))
    missing = sorted(name for name in hooks if not callable(getattr(Trainer, name, None)))
    assert not missing, f"README names hooks the Trainer does not have: {missing}"
    assert {"training_run_epoch_end", "wrap_model", "predict_step"} <= hooks


def test_repository_paths_named_in_the_docs_exist() -> None:
    pattern = re.compile(r"`((?:tests|benchmarks|examples|scripts|src|bin|docs)/[\w./-]+)`")
    missing = []
    for doc in DOC_FILES:
        for path in pattern.findall(doc.read_text()):
            if path not in PEER_PATHS and not (ROOT / path.rstrip("/")).exists():
                missing.append(f"{doc.name}: {path}")
    assert not missing, f"paths named in the docs that do not exist: {missing}"
