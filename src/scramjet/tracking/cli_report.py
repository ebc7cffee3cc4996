"""``scramjet report RUN [RUN ...]``: rebuild a run's report.html, or compare runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scramjet.tracking._files import is_run_folder
from scramjet.tracking.report import build_report, compare_runs


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``scramjet report``."""
    parser.add_argument("runs", nargs="+", help="run folder(s)")
    parser.add_argument(
        "-o",
        "--output",
        default=None,
        help="comparison page to write (default: compare.html next to the first run)",
    )


def run(args: argparse.Namespace) -> int:
    """Rebuild each run's report; with several runs also write a comparison page.

    Returns 2, writing nothing, when an argument is not a run folder.
    """
    paths = [Path(p) for p in args.runs]
    not_runs = [str(p) for p in paths if not is_run_folder(p)]
    if not_runs:
        print(
            f"scramjet report: error: not a run folder (no run.json or hyperparams.json): "
            f"{', '.join(not_runs)}. Pass folders listed by `scramjet runs ROOT`, e.g. "
            "runs/PROJECT/RUN.",
            file=sys.stderr,
        )
        return 2
    for path in paths:
        print(f"report: {build_report(path)}")
    if len(paths) > 1:
        out = Path(args.output) if args.output else paths[0].parent / "compare.html"
        print(f"comparison: {compare_runs(paths, out)}")
    return 0
