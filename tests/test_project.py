"""Project-wide checks: size budget, CLI entry point, public API surface."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "scramjet"
MAX_FILE_LINES = 800
MAX_TRAINER_LINES = 1_200
MAX_FUNCTION_LINES = 60


def _sources() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _classes(path: Path) -> list[str]:
    return [n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.ClassDef)]


def test_no_source_file_over_the_size_budget() -> None:
    """Files stay under the budget, except a file that holds one big class and nothing else
    of weight: one class per file beats a line budget (the Trainer is read in one place)."""
    too_big = {
        str(p.relative_to(ROOT)): n
        for p in _sources()
        if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES
        and not (p.name == "trainer.py" and "Trainer" in _classes(p) and n <= MAX_TRAINER_LINES)
    }
    assert not too_big, f"split these files by concept (> {MAX_FILE_LINES} lines): {too_big}"


def test_test_files_have_unique_names() -> None:
    # Test folders are no packages: pytest imports two test files of one name as one
    # module, and the second fails to collect.
    names: dict[str, list[str]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {n: p for n, p in names.items() if len(p) > 1} == {}


def test_the_trainer_is_one_class_without_mixins() -> None:
    path = SRC / "trainer" / "trainer.py"
    tree = ast.parse(path.read_text())
    (trainer,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Trainer"]
    assert trainer.bases == [], "Trainer inherits from nothing: every method is in trainer.py"
    assert "type: ignore[misc]" not in path.read_text()


def test_top_level_holds_only_the_entry_points_and_packages() -> None:
    modules = sorted(p.name for p in SRC.glob("*.py"))
    assert modules == ["__init__.py", "__main__.py", "cli.py", "schedulers.py"], modules


def test_no_function_over_the_size_budget() -> None:
    too_long: dict[str, int] = {}
    for path in _sources():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                body_start = node.body[0].lineno
                if isinstance(node.body[0], ast.Expr) and isinstance(
                    getattr(node.body[0], "value", None), ast.Constant
                ):  # don't count the docstring
                    body_start = node.body[0].end_lineno or body_start
                length = (node.end_lineno or node.lineno) - body_start + 1
                if length > MAX_FUNCTION_LINES:
                    too_long[f"{path.relative_to(ROOT)}:{node.name}"] = length
    assert not too_long, f"functions over {MAX_FUNCTION_LINES} lines: {too_long}"


def test_console_script_help_lists_subcommands() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "scramjet.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for name in ("demo", "pack", "launch", "runs", "report"):
        assert name in out


def test_unknown_subcommand_is_an_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "scramjet.cli", "trian"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "invalid choice" in proc.stderr


def test_importing_scramjet_seeds_nothing_and_stays_light() -> None:
    code = (
        "import sys, torch; s = torch.get_rng_state(); import scramjet; "
        "assert torch.equal(s, torch.get_rng_state()); "
        "heavy = [m for m in ('matplotlib', 'h5py', 'rich', 'torchmetrics') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
