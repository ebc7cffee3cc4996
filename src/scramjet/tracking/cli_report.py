"""``scramjet report RUN [RUN ...]``: rebuild a run's report.html, or compare runs."""

from __future__ import annotations

import argparse
from pathlib import Path

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
    """Rebuild each run's report; with several runs also write a comparison page."""
    paths = [Path(p) for p in args.runs]
    missing = [str(p) for p in paths if not p.is_dir()]
    if missing:
        print(f"Not a run folder: {', '.join(missing)}. Pass folders listed by `scramjet runs`.")
        return 1
    for path in paths:
        print(f"report: {build_report(path)}")
    if len(paths) > 1:
        out = Path(args.output) if args.output else paths[0].parent / "compare.html"
        print(f"comparison: {compare_runs(paths, out)}")
    return 0
