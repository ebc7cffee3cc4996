"""The sections of ``report.html`` read from a run folder: run summary, settings, results.

Every reader here is defensive: a run folder may come from an older or newer scramjet, a
crashed run, or another machine, so a missing or odd key gives an empty cell, never an
error. HTML is built from escaped strings only (no scripts, no network).
"""

from __future__ import annotations

import html
import json
import math
import socket
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scramjet.tracking import _json as strict_json
from scramjet.tracking._files import cpu_model_name, run_status
from scramjet.tracking._progress import Progress

#: Status of a run (``run.json``) -> CSS class of its badge.
_STATUS_CLASS = {
    "finished": "ok",
    "running": "info",
    "failed": "bad",
    "crashed": "bad",
    "interrupted": "warn",
    "upload-failed": "warn",
}

#: Names users give their hyperparameters -> where the run recorded the value it used.
_DECLARED: dict[str, tuple[str, str]] = {
    "lr": ("optimizer", "lr"),
    "learning_rate": ("optimizer", "lr"),
    "weight_decay": ("optimizer", "weight_decay"),
    "wd": ("optimizer", "weight_decay"),
    "momentum": ("optimizer", "momentum"),
    "betas": ("optimizer", "betas"),
    "eps": ("optimizer", "eps"),
    "epochs": ("trainer", "num_epochs"),
    "num_epochs": ("trainer", "num_epochs"),
    "gradient_accumulation_steps": ("trainer", "gradient_accumulation_steps"),
    "grad_accum": ("trainer", "gradient_accumulation_steps"),
    "accumulation_steps": ("trainer", "gradient_accumulation_steps"),
    "precision": ("trainer", "precision"),
}
_BATCH_NAMES = ("batch_size", "per_device_batch_size", "train_batch_size")
_OPTIMIZER_FIRST = ("lr", "betas", "momentum", "weight_decay", "eps")


def read_json(path: Path) -> Any:
    """The JSON in ``path`` (non-finite numbers as floats); ``{}`` when it is missing or
    unreadable."""
    try:
        return strict_json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a dict, else ``{}``."""
    return value if isinstance(value, dict) else {}


def flat(data: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as ``{"a.b": value}``."""
    out: dict[str, Any] = {}
    for key, value in as_dict(data).items():
        if isinstance(value, dict) and value:
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def fmt(value: Any) -> str:
    """A cell's text: a float's shortest exact digits, JSON for lists and dicts, ``""``
    for None."""
    if value is None:
        return ""
    if isinstance(value, float):  # every digit: two values that differ never read alike
        return repr(value) if math.isfinite(value) else str(value)
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, default=str)
    return str(value)


def table(rows: Sequence[Sequence[Any]], header: Sequence[str], css: str = "") -> str:
    """An HTML table of escaped cells."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(fmt(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    cls = f' class="{css}"' if css else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def run_labels(paths: Sequence[Path]) -> list[str]:
    """A label per run folder: its name, or, where two runs share a name (a run copied and
    continued elsewhere), as many of its last path parts as tell them apart
    (``a/proj/run_...`` and ``b/proj/run_...``); the same folder twice gets ``#1``, ``#2``."""
    full = [p.resolve().parts for p in paths]
    if len(set(full)) < len(full):  # a folder named twice
        return [f"{p.name} #{i}" for i, p in enumerate(paths, 1)]
    labels = []
    for i, parts in enumerate(full):  # each run as short as tells it from every other
        others = [o for j, o in enumerate(full) if j != i]
        depth = next(
            (d for d in range(1, len(parts) + 1) if all(o[-d:] != parts[-d:] for o in others)),
            len(parts),
        )
        labels.append("/".join(parts[-depth:]))
    return labels


# ---------------------------------------------------------------------- the run summary
def format_time(stamp: Any) -> str:
    """A Unix time as local ``YYYY-MM-DD HH:MM:SS ZONE``; ``""`` when not a number."""
    if not isinstance(stamp, int | float) or isinstance(stamp, bool) or not math.isfinite(stamp):
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(stamp))


def format_duration(seconds: float) -> str:
    """``4.2 s``, ``3 min 07 s`` or ``2 h 05 min 09 s``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    s = round(seconds)
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min {s % 60:02d} s"


def cpu_model(env: Mapping[str, Any], host: str) -> str:
    """The CPU model recorded by the run, or read here when the report is built on its host."""
    for key in ("cpu_model", "cpu", "processor"):
        value = env.get(key)
        if isinstance(value, dict):
            value = value.get("model")
        if isinstance(value, str) and value:
            return value
    if host and host == socket.gethostname():
        return f"{cpu_model_name()} (read when the report was built, on the same host)"
    return "not recorded"


def gpu_models(env: Mapping[str, Any]) -> str:
    """``2 × NVIDIA H100`` from the recorded CUDA device names; ``none`` without any."""
    names = env.get("gpu_models", env.get("cuda_devices"))
    if not isinstance(names, list):
        return "not recorded"
    if not names:
        return "none"
    counts: dict[str, int] = {}
    for name in names:
        counts[str(name)] = counts.get(str(name), 0) + 1
    return ", ".join(f"{n} × {name}" if n > 1 else name for name, n in counts.items())


def _ended_cell(info: Mapping[str, Any], progress: Progress) -> str:
    """The end time, or for a crashed run (no end recorded) the time of its last write."""
    ended = format_time(info.get("ended", info.get("finished")))
    if not ended and progress.note and progress.last_write is not None:
        ended = f"not recorded (crashed); last write {format_time(progress.last_write)}"
    return html.escape(ended)


def summary_section(
    info: Mapping[str, Any], env: Mapping[str, Any], hyper: Any, progress: Progress
) -> str:
    """Status, times, duration, host, hardware and versions, as one table. ``progress``:
    the last step and duration, those of a crashed run read from its files."""
    status = run_status(dict(info))
    badge = (
        f'<span class="status {_STATUS_CLASS.get(status, "warn")}" id="run-status">'
        f"{html.escape(status)}</span>"
    )
    seconds = progress.duration_s
    if seconds is not None:
        duration = (
            f'<span id="run-duration" data-seconds="{seconds:.3f}">'
            f"{html.escape(progress.duration_text(format_duration))}</span>"
        )
    else:
        duration = '<span id="run-duration">not finished</span>'
    host = str(info.get("host") or env.get("host") or "")
    trainer = as_dict(as_dict(hyper).get("trainer"))
    packages = as_dict(env.get("packages"))
    git = as_dict(env.get("git"))
    rows: list[tuple[str, str]] = [
        ("status", badge),
        ("started", html.escape(format_time(info.get("started")))),
        ("ended", _ended_cell(info, progress)),
        ("duration", duration),
        ("last step", html.escape(fmt(progress.last_step))),
        ("resumed", html.escape(str(len(info.get("resumed") or [])) + " time(s)")),
        ("host", html.escape(host)),
        ("device", html.escape(fmt(env.get("device") or trainer.get("device")))),
        ("world size", html.escape(fmt(env.get("world_size") or trainer.get("num_processes")))),
        ("CPU", html.escape(cpu_model(env, host))),
        ("GPU", html.escape(gpu_models(env))),
        ("Python / torch", html.escape(f"{fmt(env.get('python'))} / {fmt(packages.get('torch'))}")),
        (
            "git commit",
            html.escape(fmt(git.get("commit")) + (" (dirty)" if git.get("dirty") else "")),
        ),
    ]
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{v}</td></tr>" for k, v in rows)
    notes = "".join(f'<p class="warning">⚠ {html.escape(n)}</p>' for n in run_problems(info))
    return f'<h2>Run</h2>{notes}<table class="summary">{body}</table>'


def run_problems(info: Mapping[str, Any]) -> list[str]:
    """What ``run.json`` says went wrong: an upload error, logger errors."""
    out = []
    if info.get("upload_error"):
        out.append(f"upload failed: {fmt(info['upload_error'])}; the local files are intact.")
    errors = info.get("logger_errors")
    if isinstance(errors, list) and errors:
        out.append(f"{len(errors)} logger error(s), first: {fmt(errors[0])}")
    return out


# ---------------------------------------------------------------------- hyperparameters
def _optimizer(hyper: Mapping[str, Any]) -> dict[str, Any]:
    """What the run recorded about its optimizer (``lr`` of the first group when given)."""
    opt = dict(as_dict(hyper.get("optimizer")))
    groups = opt.get("param_groups")
    if isinstance(groups, list) and groups and isinstance(groups[0], dict):
        for key, value in groups[0].items():
            opt.setdefault(key, value)
    return opt


def _scheduler_text(hyper: Mapping[str, Any]) -> str:
    if "scheduler" not in hyper:
        return "not recorded"
    sched = hyper.get("scheduler")
    if not sched:
        return "none"
    if isinstance(sched, dict):
        name = str(sched.get("class", "scheduler"))
        rest = ", ".join(f"{k}={fmt(v)}" for k, v in sched.items() if k != "class")
        return f"{name}({rest})" if rest else name
    return str(sched)


def setup_rows(hyper: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The settings that shaped training, optimizer first, in a fixed order."""
    opt = _optimizer(hyper)
    trainer = as_dict(hyper.get("trainer"))
    model = as_dict(hyper.get("model"))
    per_device = trainer.get("train_per_device_batch_size")
    world = trainer.get("num_processes") or 1
    accum = trainer.get("gradient_accumulation_steps") or 1
    effective = per_device * world * accum if isinstance(per_device, int) else None
    rows: list[tuple[str, Any]] = [("optimizer", opt.get("class", "not recorded"))]
    rows += [(f"optimizer {k}", opt[k]) for k in _OPTIMIZER_FIRST if k in opt]
    rows += [
        ("scheduler", _scheduler_text(hyper)),
        ("epochs", trainer.get("num_epochs")),
        ("batch size per device", per_device),
        ("gradient accumulation", trainer.get("gradient_accumulation_steps")),
        ("world size", trainer.get("num_processes")),
        ("effective batch size", effective),
        ("eval batch size per device", trainer.get("eval_per_device_batch_size")),
        ("precision", trainer.get("precision")),
        ("max train steps", trainer.get("max_num_train_steps")),
        (
            "gradient clip (norm / value)",
            _pair(trainer, "gradient_clip_norm", "gradient_clip_value"),
        ),
        ("model", model.get("class")),
        ("model parameters", model.get("parameters")),
    ]
    return [(k, v) for k, v in rows if v is not None]


def _pair(data: Mapping[str, Any], a: str, b: str) -> str | None:
    if data.get(a) is None and data.get(b) is None:
        return None
    return f"{fmt(data.get(a)) or '-'} / {fmt(data.get(b)) or '-'}"


def other_rows(hyper: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Everything else recorded (optimizer internals, trainer flags), sorted by name."""
    shown = {"optimizer.class", "model.class", "model.parameters"}
    shown |= {f"optimizer.{k}" for k in _OPTIMIZER_FIRST}
    shown |= {
        f"trainer.{k}"
        for k in (
            "num_epochs",
            "train_per_device_batch_size",
            "gradient_accumulation_steps",
            "num_processes",
            "eval_per_device_batch_size",
            "precision",
            "max_num_train_steps",
            "gradient_clip_norm",
            "gradient_clip_value",
        )
    }
    # in the title, the setup or the declared table (``hyperparams`` itself: none declared)
    shown |= {"project", "experiment", "run", "scheduler", "hyperparams"}
    shown_prefixes = ("hyperparams.", "scheduler.")
    items = flat(hyper).items()
    return sorted((k, v) for k, v in items if k not in shown and not k.startswith(shown_prefixes))


def _same(declared: Any, used: Any) -> bool:
    if isinstance(used, Mapping) and isinstance(used.get("per_group"), list):
        return any(_same(declared, one) for one in used["per_group"])  # one of the groups
    if isinstance(declared, list | tuple) and isinstance(used, list | tuple):
        return len(declared) == len(used) and all(_same(a, b) for a, b in zip(declared, used))
    numbers = (int, float)
    if isinstance(declared, numbers) and isinstance(used, numbers):
        return math.isclose(float(declared), float(used), rel_tol=1e-9, abs_tol=0.0)
    return str(declared) == str(used)


def contradictions(hyper: Mapping[str, Any]) -> list[str]:
    """One sentence per declared hyperparameter that differs from what the run used."""
    declared = flat(hyper.get("hyperparams"))
    opt = _optimizer(hyper)
    sources = {"optimizer": opt, "trainer": as_dict(hyper.get("trainer"))}
    out = []
    for name, value in declared.items():
        short = name.rsplit(".", 1)[-1].lower()
        if short in _BATCH_NAMES:
            out += _batch_contradiction(name, value, sources["trainer"])
            continue
        where = _DECLARED.get(short)
        if where is None or where[1] not in sources[where[0]]:
            continue
        used = sources[where[0]][where[1]]
        if not _same(value, used):
            owner = (
                f"the optimizer ({opt.get('class', '?')})"
                if where[0] == "optimizer"
                else "the Trainer"
            )
            out.append(
                f"hyperparams declare {name} = {fmt(value)}, but {owner} used "
                f"{where[1]} = {fmt(used)}; the run trained with {fmt(used)}."
            )
    return out


def _batch_contradiction(name: str, value: Any, trainer: Mapping[str, Any]) -> list[str]:
    per_device = trainer.get("train_per_device_batch_size")
    if not isinstance(per_device, int) or not isinstance(value, int | float):
        return []
    world = trainer.get("num_processes") or 1
    accum = trainer.get("gradient_accumulation_steps") or 1
    accepted = {per_device, per_device * world, per_device * world * accum}
    if value in accepted:
        return []
    return [
        f"hyperparams declare {name} = {fmt(value)}, but the Trainer used {per_device} per "
        f"device x {world} process(es) x {accum} accumulation step(s)."
    ]


def hyperparams_section(hyper: Any) -> str:
    """Your hyperparameters, then the training setup, then everything else (folded)."""
    hyper = as_dict(hyper)
    parts = ["<h2>Hyperparameters</h2>"]
    for sentence in contradictions(hyper):
        parts.append(f'<p class="warning">⚠ {html.escape(sentence)}</p>')
    declared = sorted(flat(hyper.get("hyperparams")).items())
    if declared:
        parts.append("<h3>Declared</h3>" + table(declared, ["name", "value"]))
    parts.append("<h3>Training setup</h3>" + table(setup_rows(hyper), ["setting", "value"]))
    others = other_rows(hyper)
    if others:
        parts.append(
            f"<details><summary>Other recorded settings ({len(others)})</summary>"
            + table(others, ["name", "value"])
            + "</details>"
        )
    return "".join(parts)


# ---------------------------------------------------------------------- results
def _matrix(value: Any) -> list[list[float]] | None:
    if not isinstance(value, list) or not value:
        return None
    rows = []
    for row in value:
        if not isinstance(row, list) or len(row) != len(value):
            return None
        if not all(isinstance(c, int | float) and not isinstance(c, bool) for c in row):
            return None
        rows.append([float(c) for c in row])
    return rows


def _class_names(data: Mapping[str, Any], n: int) -> list[str]:
    for key in ("class_names", "labels", "classes"):
        names = data.get(key)
        if isinstance(names, list) and len(names) == n:
            return [str(x) for x in names]
    return [str(i) for i in range(n)]


def _count(value: float) -> str:
    if not math.isfinite(value):  # a row of a normalised matrix with no sample: nan
        return str(value)
    return str(int(value)) if value == int(value) else f"{value:.4g}"


def _shade(value: float, top: float) -> float:
    return 0.08 + 0.75 * value / top if math.isfinite(value) else 0.0


def confusion_html(name: str, matrix: list[list[float]], labels: list[str]) -> str:
    """The matrix (rows: true class, columns: predicted), shaded by count."""
    top = max((c for row in matrix for c in row if math.isfinite(c)), default=0.0) or 1.0
    head = "".join(f"<th>{html.escape(lab)}</th>" for lab in labels)
    body = []
    for lab, row in zip(labels, matrix):
        cells = "".join(
            f'<td class="cm" style="background:rgba(74,123,208,{_shade(c, top):.2f})">'
            f"{_count(c)}</td>"
            for c in row
        )
        body.append(f"<tr><th>{html.escape(lab)}</th>{cells}</tr>")
    return (
        f'<table class="confusion" id="confusion-{html.escape(name)}">'
        f'<thead><tr><th class="corner">true \\ predicted</th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def per_class_rows(matrix: list[list[float]], labels: list[str]) -> list[list[Any]]:
    """Precision, recall, F1 and support of each class, computed from the matrix."""
    rows = []
    for i, lab in enumerate(labels):
        tp = matrix[i][i]
        support = sum(matrix[i])
        predicted = sum(row[i] for row in matrix)
        precision = tp / predicted if predicted else math.nan
        recall = tp / support if support else math.nan
        both = precision + recall
        f1 = 2 * precision * recall / both if both and math.isfinite(both) else math.nan
        rows.append([lab, precision, recall, f1, _count(support)])
    return rows


def matrix_of(data: Any) -> tuple[list[list[float]], list[str]] | None:
    """The confusion matrix of a result file and its class names, when it has a square one."""
    data = as_dict(data)
    matrix = _matrix(data.get("confusion_matrix"))
    return None if matrix is None else (matrix, _class_names(data, len(matrix)))


def results_section(name: str, data: Any) -> str:
    """Scalar metrics, then the confusion matrix and per-class metrics when present."""
    data = as_dict(data)
    scalars = [(k, v) for k, v in flat(data).items() if not isinstance(v, list)]
    parts = [f"<h2>Results: {html.escape(name)}</h2>", table(scalars, ["metric", "value"])]
    found = matrix_of(data)
    if found is not None:
        matrix, labels = found
        parts.append("<h3>Confusion matrix</h3>" + confusion_html(name, matrix, labels))
        parts.append(
            "<h3>Per class</h3>"
            + table(
                per_class_rows(matrix, labels),
                ["class", "precision", "recall", "F1", "support"],
            )
        )
    return "".join(parts)


def result_files(run: Path) -> list[Path]:
    """``results/*.json`` without the saved predictions."""
    folder = run / "results"
    if not folder.is_dir():
        return []
    return [p for p in sorted(folder.glob("*.json")) if not p.stem.endswith("_predictions")]


def environment_rows(env: Any) -> list[tuple[str, Any]]:
    """The environment file, flattened and sorted."""
    return sorted(flat(env).items())
