"""``scramjet runs [ROOT]``: list tracked runs with their key metrics."""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import os
import sys
from pathlib import Path
from typing import Any

from rich.cells import cell_len

from scramjet.tracking import _json as strict_json
from scramjet.tracking._files import is_run_folder, read_json, run_status
from scramjet.tracking._progress import run_progress
from scramjet.tracking.loggers.base import MetricRow
from scramjet.tracking.loggers.csv import metric_series, read_metrics

#: The metric columns shown when ``--metrics`` is not given.
DEFAULT_METRICS = "train_loss_epoch,eval_loss_epoch"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``scramjet runs``."""
    parser.add_argument(
        "root",
        nargs="?",
        default="runs",
        help="runs root folder (default: runs); a project folder or one run folder works too",
    )
    parser.add_argument("--project", help="only this project")
    parser.add_argument(
        "--metrics",
        action="append",
        default=None,
        help=f"comma-separated metric names to show, repeatable (default: {DEFAULT_METRICS}; "
        "a name no run has is named on stderr; a name holding a comma goes in double "
        "quotes: --metrics 'accuracy,\"f1[a,b]\"'): the last epoch value from "
        "metrics.jsonl, else the value in results/*.json (test first, then val, then the "
        "others); RESULTS/NAME picks one results file, e.g. test/accuracy",
    )
    parser.add_argument(
        "--params",
        action="append",
        default=None,
        help="comma-separated hyperparameter names to show, repeatable (nested names joined "
        "with '.', e.g. lr,optim.betas; a group name such as optim shows every name under "
        "it; a name holding a comma goes in double quotes); default: every hyperparameter "
        "whose value differs between the listed runs; '' shows none",
    )


def split_names(values: list[str]) -> list[str]:
    """The names of ``--metrics``/``--params`` values: each split at its commas as a CSV
    line (a name in double quotes keeps its commas, ``""`` inside it is one quote), blanks
    dropped, the first of repeated names kept."""
    names = [n.strip() for value in values for n in next(csv.reader([value]), [])]
    return list(dict.fromkeys(n for n in names if n))


def _as_passed(name: str) -> str:
    """``name`` as ``--metrics``/``--params`` select it: quoted when it holds a comma or a
    double quote."""
    return '"' + name.replace('"', '""') + '"' if "," in name or '"' in name else name


def find_runs(root: str | Path, project: str | None = None) -> list[Path]:
    """Run folders (those with ``run.json`` or ``hyperparams.json``) under ``root``, oldest
    first: ``root/PROJECT/RUN``, or ``root/RUN`` when ``root`` is a project folder, or
    ``root`` itself when it is a run folder."""
    base = Path(root)
    if is_run_folder(base):
        found = [base]
    else:  # ROOT/PROJECT/RUN, and ROOT/RUN for a project folder
        projects = _folders(base)
        found = [run for p in projects for run in _folders(p) if is_run_folder(run)]
        found += [p for p in projects if is_run_folder(p)]
    if project:
        found = [p for p in found if p.parent.name == project]
    return by_start(found)


def _below(root: Path, depth: int) -> list[Path]:
    """The folders ``depth`` levels below ``root`` (see :func:`_folders`)."""
    level = [root]
    for _ in range(depth):
        level = [sub for folder in level for sub in _folders(folder)]
    return level


def _folders(folder: Path) -> list[Path]:
    """The folders in ``folder``, by name. A folder removed after it was listed and before
    it is scanned (a cleanup running beside ``scramjet runs``) has none, where ``Path.glob``
    raises ``FileNotFoundError``; one that cannot be read has none, as ``Path.glob`` has it."""
    try:
        with os.scandir(folder) as entries:
            return sorted(Path(e.path) for e in entries if e.is_dir())
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []


def by_start(runs: list[Path]) -> list[Path]:
    """``runs`` in the order ``scramjet runs`` lists them: by start time (``run.json``'s
    ``started``; a run without one first), then by path."""
    return sorted(runs, key=lambda p: (_started(_info(p)), str(p)))


def list_runs(root: str | Path = "runs", project: str | None = None) -> list[dict[str, Any]]:
    """The tracked runs under ``root``, oldest first, as plain dicts to filter and compare.

    ``root`` is what ``Experiment(root=...)`` was given (a project folder or one run folder
    works too). Each run gives ``run_dir``, ``project``, ``name``, ``experiment``,
    ``status`` (``crashed`` for a ``running`` run whose process on this host is gone;
    ``unreadable (...)`` for a damaged one), ``started`` (a ``datetime`` or None),
    ``duration_s`` (a crashed run's: the time its processes ran up to their last write,
    and then ``duration_note`` says so, ``"crashed; to its last write"``; None otherwise),
    ``last_step`` (a run that did not end: its last metric row's step), ``epochs``,
    ``metrics`` (each epoch metric's last value,
    a metric logged only per step its last step's, and every number of ``results/*.json``
    as ``RESULTS/NAME``, nested ones ``RESULTS/GROUP/NAME``) and ``hyperparams`` (the
    declared ones, nested names joined with ``.``). ``pandas.DataFrame(rows)`` makes a
    table of them.

    Raises:
        FileNotFoundError: ``root`` is not a folder (a URL included: copy the runs first).
    """
    problem = _root_problem(os.fspath(root), "list_runs")
    if problem:
        raise FileNotFoundError(f"list_runs: {problem}")
    records = [(run, _run_record(run)) for run in find_runs(Path(root), project)]
    return [record for run, record in records if run.is_dir()]  # not one removed meanwhile


def _run_record(run: Path) -> dict[str, Any]:
    record: dict[str, Any] = {"run_dir": run.resolve(), "project": run.parent.name}
    record.update(name=run.name, experiment=None, status="?", started=None, duration_s=None)
    record.update(duration_note=None, last_step=None, epochs=0, metrics={}, hyperparams={})
    try:
        info = _info(run)
        started = _started(info)
        rows = read_metrics(run)
        epochs, metrics = metric_summary(run, rows)
        status = run_status(info)
        progress = run_progress(run, info, status, rows)
        for source, values in _results(run).items():
            for key, value in values.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    metrics[f"{source}/{key}"] = float(value)
        record.update(
            experiment=info.get("experiment"),
            status=status,
            started=_dt.datetime.fromtimestamp(started) if started else None,
            duration_s=progress.duration_s,
            duration_note=progress.note,
            last_step=progress.last_step,
            epochs=epochs,
            metrics=metrics,
            hyperparams=hyperparams(run),
        )
        if not info and _damaged(run):  # the rest of the folder still counts
            record["status"] = "unreadable (run.json is not a JSON object)"
    except Exception as error:  # one damaged run folder must not hide the others
        record["status"] = f"unreadable ({type(error).__name__}: {error})"[:80]
    return record


def _info(run: Path) -> dict[str, Any]:
    info = read_json(run / "run.json")
    return info if isinstance(info, dict) else {}  # a damaged file: no information


def _damaged(run: Path) -> bool:
    """Whether ``run.json`` exists but holds no JSON object (``{}`` is an object: a run
    whose status is unknown, as ``scramjet report`` shows it)."""
    try:
        return not isinstance(strict_json.loads((run / "run.json").read_text("utf-8")), dict)
    except FileNotFoundError:
        return False
    except (OSError, UnicodeDecodeError, ValueError):
        return True


def _started(info: dict[str, Any]) -> float:
    started = info.get("started")
    return float(started) if isinstance(started, int | float) else 0.0


def summarize(run: Path, metrics: list[str]) -> dict[str, Any]:
    """Status, start time, last step and the last value of each requested metric (under
    the key ``"metric:" + name``).

    A run whose files cannot be read is listed with status ``unreadable (<reason>)``
    instead of stopping the listing of every other run.
    """
    try:
        return _summarize(run, metrics)
    except Exception as error:  # one damaged run folder must not hide the others
        row: dict[str, Any] = {
            "run": f"{run.parent.name}/{run.name}",
            "status": f"unreadable ({type(error).__name__}: {error})"[:80],
            "started": "",
            "epochs": 0,
        }
        row.update({_METRIC + name: None for name in metrics})
        return row


def _summarize(run: Path, metrics: list[str]) -> dict[str, Any]:
    info = _info(run)
    epochs, last = metric_summary(run)
    started = _started(info)
    damaged = not info and _damaged(run)  # said as list_runs says it
    row: dict[str, Any] = {
        "run": f"{run.parent.name}/{run.name}",
        "status": "unreadable (run.json is not a JSON object)" if damaged else run_status(info),
        "started": _dt.datetime.fromtimestamp(started).strftime("%Y-%m-%d %H:%M")
        if started
        else "",
        "epochs": epochs,
    }
    results = _results(run)
    for name in metrics:  # under their own keys: a metric may be named like a fixed column
        row[_METRIC + name] = last[name] if name in last else _result_value(results, name)
    return row


#: The prefix of a metric's key in a :func:`summarize` row: ``"metric:" + name``.
_METRIC = "metric:"


def metric_summary(run: Path, rows: list[MetricRow] | None = None) -> tuple[int, dict[str, float]]:
    """The last epoch with a metric row, and each metric's last epoch value (a metric
    logged only per step: its last step's), from one read of the run's metric rows
    (``rows`` when already read)."""
    rows = read_metrics(run) if rows is None else rows
    epochs = metric_series(rows, "epoch")
    last = {name: values[-1] for name, (_, values) in metric_series(rows, "step").items()}
    last.update({name: values[-1] for name, (_, values) in epochs.items()})
    return max((max(xs) for xs, _ in epochs.values()), default=0), last


def hyperparams(run: Path) -> dict[str, Any]:
    """The run's declared hyperparameters, nested names joined with ``.``, values as
    ``hyperparams.json`` holds them (a list stays a list); ``{}`` when the file is missing
    or damaged."""
    data = read_json(run / "hyperparams.json")
    declared = data.get("hyperparams") if isinstance(data, dict) else None
    return _flat(declared) if isinstance(declared, dict) else {}


def _flat(values: dict[str, Any], sep: str = ".", prefix: str = "") -> dict[str, Any]:
    """Nested dicts flattened, their names joined with ``sep``; an empty one is a value
    (``{}``: a settings group with nothing set), as the loggers and name checks have it."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict) and value:
            out.update(_flat(value, sep, f"{prefix}{key}{sep}"))
        else:
            out[f"{prefix}{key}"] = value
    return out


def differing(params: list[dict[str, Any]]) -> list[str]:
    """Names whose value is not the same in every run (a missing name reads ``-``, as
    ``None`` does), those most runs have first, then by name."""
    names = {name for p in params for name in p}
    found = [n for n in names if len({_param_text(p.get(n)) for p in params}) > 1]
    return sorted(found, key=lambda n: (-sum(n in p for p in params), n))


#: Hyperparameter columns ``scramjet runs`` picks by itself, and their widest cell.
_AUTO_PARAMS, _CELL = 6, 24


def _param_text(value: Any) -> str:
    """A hyperparameter as written: every digit of a float (``0.99995``, not ``1``)."""
    if isinstance(value, float):
        return repr(value)
    return _fmt(value)


def _cell(value: Any) -> str:
    text = _param_text(value)
    return text if len(text) <= _CELL else text[: _CELL - 1] + "…"


def _results(run: Path) -> dict[str, dict[str, Any]]:
    """``{results name: {metric: value}}`` from ``results/*.json`` (predictions left out),
    nested metrics named as the loggers name them (``per_class/cat``)."""
    found = {}
    for path in sorted((run / "results").glob("*.json")):
        if path.stem.endswith("_predictions"):
            continue
        data = read_json(path)
        if isinstance(data, dict):
            found[path.stem] = _flat(data, "/")
    return found


def _result_value(results: dict[str, dict[str, Any]], name: str) -> float | None:
    """``name`` (or ``RESULTS/NAME``) as a number from the results; None when absent."""
    source, metric = name.split("/", 1) if "/" in name else ("", name)
    if source in results:
        order = [source]
    else:
        metric = name  # a nested metric (``per_class/cat``) of any results file
        order = sorted(results, key=lambda k: (k != "test", k != "val", k))
    for source in order:
        value = results[source].get(metric)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def metric_names(run: Path) -> set[str]:
    """Every metric name ``--metrics`` can show for ``run``."""
    names = set(metric_summary(run)[1])
    for source, values in _results(run).items():
        numbers = [
            k for k, v in values.items() if isinstance(v, int | float) and not isinstance(v, bool)
        ]
        names.update(numbers)
        names.update(f"{source}/{k}" for k in numbers)
    return names


def _fmt(v: Any) -> str:
    """A cell: ``-`` for a missing value, ``nan`` for a NaN (a diverged run), 4 digits."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _root_problem(arg: str, reader: str = "scramjet runs") -> str | None:
    """Why ``arg`` cannot be listed (a URL, no such folder), or None."""
    if "://" in arg:
        return (
            f"{reader} reads a local folder; received the URL {arg}. Pass the local "
            "root the Experiment wrote (its root=, default 'runs'), or copy the runs first "
            "(e.g. `aws s3 sync URL runs/`)."
        )
    if not Path(arg).is_dir():
        return (
            f"no runs folder at {arg!r}; pass the root given to Experiment(root=...) "
            "(default 'runs', relative to where training ran)."
        )
    return None


def _param_columns(params: list[str] | None, declared: list[dict[str, Any]]) -> list[str]:
    """The hyperparameter columns: those asked for, else those that differ (at most six)."""
    if params is None:
        shown = differing(declared) if len(declared) > 1 else []
        if len(shown) > _AUTO_PARAMS:
            more, shown = shown[_AUTO_PARAMS:], shown[:_AUTO_PARAMS]
            print(
                f"scramjet runs: {len(more)} more hyperparameters differ ({', '.join(more)}); "
                f"choose the columns with --params",
                file=sys.stderr,
            )
        return shown
    asked = split_names(params)
    names = list(dict.fromkeys(n for d in declared for n in d))  # in the runs' order
    columns: list[str] = []
    unknown = []
    for name in asked:
        found = select_params(name, names)
        columns += found if found else [name]  # an unknown name: a column of `-`, a warning
        if not found:
            unknown.append(name)
    if unknown:
        parts = [n.split(".") for n in names]
        groups = sorted({".".join(p[:i]) for p in parts for i in range(1, len(p))})
        print(
            f"scramjet runs: warning: no run has a hyperparameter named "
            f"{', '.join(map(repr, unknown))}; known: "
            f"{', '.join(map(_as_passed, sorted(names))) or 'none'}"
            + (f" (groups: {', '.join(groups)})" if groups else ""),
            file=sys.stderr,
        )
    return list(dict.fromkeys(columns))


def select_params(name: str, names: list[str]) -> list[str]:
    """The flattened hyperparameter names ``name`` selects among ``names``: itself, and
    when it names a group (``optim`` of ``{"optim": {"lr": ...}}``), every name under it
    (``optim.lr``, ``optim.momentum``, nested groups included), in the order of ``names``."""
    return [n for n in names if n == name or n.startswith(name + ".")]


def _deeper_roots(root: Path) -> str:
    """Where run folders lie further down than ``root/PROJECT/RUN`` (sweeps kept as
    ``runs/sweep1/PROJECT/RUN``): those roots and their run counts, as the end of a
    sentence; ``""`` when there are none."""
    counts: dict[Path, int] = {}
    three = _below(root, 3)
    for run in three + [sub for folder in three for sub in _folders(folder)]:
        if (run / "run.json").is_file() and not any(
            is_run_folder(p) for p in run.parents if root in p.parents
        ):
            counts[run.parent.parent] = counts.get(run.parent.parent, 0) + 1
    if not counts:
        return ""
    shown = [f"{r} ({n} run{'s' if n > 1 else ''})" for r, n in sorted(counts.items())[:10]]
    more = f", and {len(counts) - 10} more" if len(counts) > 10 else ""
    return (
        f" (runs are read at ROOT/PROJECT/RUN); run folders lie further down, under "
        f"{', '.join(shown)}{more}: pass one of these as ROOT"
    )


def _unknown_project(root: Path, project: str) -> str:
    """Why ``--project`` matched no run: the projects that exist under ``root``."""
    projects = sorted({p.parent.name for p in find_runs(root)})
    if not projects:
        return f"no runs of project {project!r} under {root}: it holds no runs at all."
    return (
        f"no runs of project {project!r} under {root}; its projects: "
        f"{', '.join(projects)}. Pass one of them to --project."
    )


def _print_table(table: list[list[str]]) -> None:
    """Columns two spaces apart, widths in terminal cells (a CJK character or an emoji
    takes two, a combining accent none), so wide names keep the columns aligned."""
    widths = [max(cell_len(line[i]) for line in table) for i in range(len(table[0]))]
    for line in table:
        padded = [cell + " " * (w - cell_len(cell)) for cell, w in zip(line, widths)]
        print("  ".join(padded).rstrip())


def run(args: argparse.Namespace) -> int:
    """Print a table of runs; returns 1 when ``root`` is a URL or does not exist, or when
    ``--project`` names no project under it (the projects there are named on stderr).

    A metric asked for with ``--metrics`` that no run has is named on stderr, with the
    names that exist.
    """
    problem = _root_problem(args.root)
    if problem:
        print(f"scramjet runs: error: {problem}", file=sys.stderr)
        return 1
    root = Path(args.root)
    asked = args.metrics is not None
    metrics = split_names(args.metrics if asked else [DEFAULT_METRICS])
    found = [(r, summarize(r, metrics)) for r in find_runs(root, args.project)]
    kept = [(r, row) for r, row in found if r.is_dir()]  # not a run removed meanwhile
    runs, rows = [r for r, _ in kept], [row for _, row in kept]
    if not rows and args.project:
        print(f"scramjet runs: error: {_unknown_project(root, args.project)}", file=sys.stderr)
        return 1
    if not rows:  # an empty root is an empty listing, not an error
        print(f"No runs under {root}{_deeper_roots(root)}.")
        return 0
    missing_everywhere = [m for m in metrics if all(row[_METRIC + m] is None for row in rows)]
    if missing_everywhere and asked:  # a typo, or a name kept elsewhere: say which exist
        _warn_unknown(missing_everywhere, runs)
    declared = [hyperparams(r) for r in runs]
    shown = _param_columns(args.params, declared)
    fixed = ["run", "status", "started", "epochs"]
    taken = set(fixed) | set(metrics)  # a hyperparameter named `epochs` is not the column
    header = fixed + [p if p not in taken else f"hp.{p}" for p in shown]
    header += [m if m not in fixed else f"metric.{m}" for m in metrics]
    table = [header]
    for row, params in zip(rows, declared):
        cells = [_fmt(row[h]) for h in fixed] + [_cell(params.get(p)) for p in shown]
        table.append(cells + [_fmt(row[_METRIC + m]) for m in metrics])
    _print_table(table)
    return 0


def _warn_unknown(metrics: list[str], runs: list[Path]) -> None:
    known: set[str] = set()
    for run in runs:
        try:
            known |= metric_names(run)
        except Exception:  # a damaged run is reported in its row
            continue
    unknown = [m for m in metrics if m not in known]
    if unknown:
        quoted = sorted(n for n in known if n != _as_passed(n))
        hint = (
            f" (a name with a comma goes in double quotes: --metrics '{_as_passed(quoted[0])}')"
            if quoted
            else ""
        )
        print(
            f"scramjet runs: warning: no run has a metric named {', '.join(map(repr, unknown))}"
            f"; known: {', '.join(map(_as_passed, sorted(known))) or 'none'}{hint}",
            file=sys.stderr,
        )
