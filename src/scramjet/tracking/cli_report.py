"""``scramjet report RUN [RUN ...]``: rebuild a run's report.html, or compare runs."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from scramjet.runtime.files import TMP_PREFIX, why_not_creatable
from scramjet.tracking._files import is_run_folder
from scramjet.tracking.cli_runs import by_start
from scramjet.tracking.report import build_report, compare_runs, is_comparison_page

#: The comparison page's name when ``-o`` is not given, or names a folder.
COMPARE_PAGE = "compare.html"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``scramjet report``."""
    parser.add_argument(
        "runs",
        nargs="+",
        help="run folder(s), reported and compared in start order (as `scramjet runs` lists "
        "them); HTML pages among them (a glob such as runs/PROJECT/* also "
        "matches the compare.html written there before) are skipped",
    )
    parser.add_argument(
        "-o",
        "--output",
        default=None,
        help="comparison page to write, with two or more runs (default: compare.html next "
        "to the first run; a folder: compare.html in it)",
    )


def _error(message: str) -> int:
    print(f"scramjet report: error: {message}", file=sys.stderr)
    return 2


def _output(arg: str | None, first_run: Path) -> tuple[Path, str | None]:
    """The comparison page to write and, when it cannot be written, why."""
    out = Path(arg) if arg else first_run.parent / COMPARE_PAGE
    if out.is_dir() or (arg and arg.endswith(("/", os.sep))):  # `-o new_folder/`: a folder
        out = out / COMPARE_PAGE
    if out.is_dir():
        return out, f"{str(out)!r} is a folder; name the HTML file to write"
    run = _run_holding(out)
    if run is not None and out.is_file() and not is_comparison_page(out):
        # -o RUN/metrics.csv would replace the run's data; a comparison page written there
        # before is replaced, as anywhere else
        return out, (
            f"{str(out)!r} is a file of the run folder {str(run)!r}, which the comparison "
            f"page would replace; name a new file, e.g. {str(run.parent / COMPARE_PAGE)!r}"
        )
    return out, why_not_creatable(out)


def _run_holding(path: Path) -> Path | None:
    """The run folder that ``path`` lies in (at any depth), or None."""
    return next((p for p in path.resolve().parents if is_run_folder(p)), None)


def run(args: argparse.Namespace) -> int:
    """Rebuild each run's report; with several runs also write a comparison page.

    Returns 2, writing nothing, when an argument is not a run folder, when ``-o`` is given
    with a single run, or when the comparison page cannot be written; 1 when writing fails
    midway.
    """
    urls = [p for p in args.runs if "://" in p]
    if urls:
        return _error(
            f"scramjet report reads local run folders; received the URL(s) {', '.join(urls)}. "
            "Copy the run folders first (e.g. `aws s3 sync URL runs/PROJECT/RUN`), or pass "
            "the local folder the Experiment wrote (its root=)."
        )
    given = [Path(p) for p in args.runs]
    skipped = [p for p in given if p.is_file() and p.suffix.lower() in (".html", ".htm")]
    unique = {p.resolve(): p for p in reversed(given) if p not in skipped}  # a run named twice
    paths = [p for p in given if p not in skipped and unique.get(p.resolve()) is p]
    paths = by_start(paths)  # as `scramjet runs` lists them, whatever order they came in
    not_runs = [str(p) for p in paths if not is_run_folder(p)]
    if not_runs or not paths:
        return _error(
            f"not a run folder (no run.json or hyperparams.json): "
            f"{', '.join(not_runs or map(str, given))}. Pass folders listed by "
            "`scramjet runs ROOT`, e.g. runs/PROJECT/RUN."
        )
    if args.output is not None and len(paths) < 2:
        return _error(
            f"-o/--output names the comparison page, written for two or more runs; received "
            f"one run ({paths[0]}), whose page is {paths[0] / 'report.html'}. Drop -o, or "
            "pass more runs."
        )
    out, problem = _output(args.output, paths[0]) if len(paths) > 1 else (None, None)
    if problem:
        return _error(f"-o/--output: {problem}")
    if skipped:
        print(
            f"scramjet report: skipped {', '.join(map(str, skipped))} (an HTML page, not a "
            "run folder)",
            file=sys.stderr,
        )
    target: Path | None = None  # the page being written: named in an error, not its temp file
    try:
        for path in paths:
            target = path / "report.html"
            print(f"report: {build_report(path)}")
        if out is not None:
            target = out
            print(f"comparison: {compare_runs(paths, out)}")
    except OSError as error:  # a full disk, a folder that turned read-only meanwhile
        where = _failed_path(error, target)
        print(
            f"scramjet report: error: could not write{f' {where!r}' if where else ''}: "
            f"{error.strerror or error}",
            file=sys.stderr,
        )
        return 1
    return 0


def _failed_path(error: OSError, target: Path | None) -> str | None:
    """The file ``error`` is about, as the user knows it: the page being written in place of
    the hidden temporary file its atomic write used."""
    name = os.fsdecode(error.filename) if error.filename else None
    if name is None or Path(name).name.startswith(TMP_PREFIX):
        return str(target) if target is not None else name
    return name
