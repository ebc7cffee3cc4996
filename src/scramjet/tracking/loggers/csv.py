"""CSV and JSON Lines metric files (the default logger)."""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scramjet.tracking import _json as strict_json
from scramjet.tracking.loggers.base import MetricRow, Tracker

CSV_FIELDS = ("scope", "epoch", "step", "time", "name", "value")


class CSVTracker(Tracker):
    """Appends metrics to ``metrics.csv`` (long format) and ``metrics.jsonl``.

    ``metrics.csv`` has one line per value (``scope, epoch, step, time, name, value``), so
    new metric names never change the header; ``metrics.jsonl`` has one JSON object per
    row. Both files are appended in batches and read back by :func:`read_metrics`.

    Args:
        run_dir: the run folder.
    """

    name = "csv"

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.run_dir = Path(run_dir)
        self.csv_path = self.run_dir / "metrics.csv"
        self.jsonl_path = self.run_dir / "metrics.jsonl"
        # Imported here: scramjet.runtime imports torch, and the readers below
        # (used by ``scramjet report``) must not.
        from scramjet.runtime.files import atomic_write_text

        # The epoch rows in the files, written back if the folder is removed while the run
        # goes on (None: files found here, read at the first write or truncate).
        self._epoch_rows: list[MetricRow] | None = None
        if not self.csv_path.exists() and not self.jsonl_path.exists():
            self._epoch_rows = []
        if not self.csv_path.exists():
            atomic_write_text(self.csv_path, ",".join(CSV_FIELDS) + "\n")
        if not self.jsonl_path.exists():
            atomic_write_text(self.jsonl_path, "")

    def _known_epoch_rows(self) -> list[MetricRow]:
        if self._epoch_rows is None:
            self._epoch_rows = [r for r in read_metrics(self.run_dir) if r["scope"] == "epoch"]
        return self._epoch_rows

    def reopen_removed_files(self) -> None:
        """The metric files (or the whole run folder) removed: write them again. Without
        ``metrics.jsonl`` they hold the epoch rows logged so far (kept in memory: one per
        epoch and evaluation), the step rows being lost with the files; a removed
        ``metrics.csv`` alone is written again from ``metrics.jsonl``."""
        known = self._known_epoch_rows()
        if self.csv_path.is_file() and self.jsonl_path.is_file():
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.jsonl_path.is_file():
            rows = read_metrics(self.run_dir)
            self._write_all(rows)
            self._note(f"metrics.csv was written again from metrics.jsonl ({len(rows)} rows)")
            return
        self._write_all(known)
        epochs = sorted({r["epoch"] for r in known})
        span = f" (epochs {epochs[0]}-{epochs[-1]})" if epochs else ""
        self._note(
            f"metrics.csv and metrics.jsonl were written again with the {len(known)} epoch "
            f"row(s) of the run so far{span}; the per-step rows written before were lost"
        )

    def log_metrics(self, rows: Sequence[MetricRow]) -> None:
        """Append the rows to both files (one write per file)."""
        if not rows:
            return
        self.reopen_removed_files()
        self._known_epoch_rows().extend(r for r in rows if r["scope"] == "epoch")
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        lines = []
        for row in rows:
            for name, value in row["metrics"].items():
                writer.writerow(
                    [
                        row["scope"],
                        row["epoch"],
                        row["step"],
                        f"{row['time']:.3f}",
                        name,
                        repr(float(value)),
                    ]
                )
            lines.append(strict_json.dumps(_json_row(row)))
        with open(self.csv_path, "a", encoding="utf-8", newline="") as fh:
            fh.write(buf.getvalue())
        with open(self.jsonl_path, "a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")

    def truncate(self, step: int, epoch: int) -> None:
        """Drop rows after the resumed checkpoint and rewrite both files atomically."""
        rows = [r for r in read_metrics(self.run_dir) if _kept(r, step, epoch)]
        self._write_all(rows)
        self._epoch_rows = [r for r in rows if r["scope"] == "epoch"]

    def _write_all(self, rows: Sequence[MetricRow]) -> None:
        """Both files holding exactly ``rows``, each written atomically."""
        from scramjet.runtime.files import atomic_write_text  # see __init__

        atomic_write_text(
            self.jsonl_path, "".join(strict_json.dumps(_json_row(r)) + "\n" for r in rows)
        )
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(CSV_FIELDS)
        for r in rows:
            for name, value in r["metrics"].items():
                writer.writerow(
                    [
                        r["scope"],
                        r["epoch"],
                        r["step"],
                        f"{r['time']:.3f}",
                        name,
                        repr(float(value)),
                    ]
                )
        atomic_write_text(self.csv_path, buf.getvalue())


def _kept(row: MetricRow, step: int, epoch: int) -> bool:
    """Whether a row logged before a resume stays: it came before the restored checkpoint
    (``step`` updates; ``epoch``: the epochs whose rows at that step stay, the finished
    ones and an epoch that goes on after the checkpoint). An epoch-scope row of an earlier
    step (an evaluation inside the epoch) stays; one of the checkpoint's own step stays
    unless its epoch's end events run again (a checkpoint saved before them)."""
    if row["scope"] == "epoch":
        return row["step"] < step or (row["step"] == step and row["epoch"] <= epoch)
    return row["step"] <= step


def _json_row(row: MetricRow) -> dict[str, Any]:
    return {
        "scope": row["scope"],
        "epoch": row["epoch"],
        "step": row["step"],
        "time": round(row["time"], 3),
        "metrics": row["metrics"],
    }


def read_metrics(run_dir: str | os.PathLike[str]) -> list[MetricRow]:
    """Rows of ``metrics.jsonl`` (a torn last line from a crash is ignored)."""
    path = Path(run_dir) / "metrics.jsonl"
    rows: list[MetricRow] = []
    if not path.exists():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            data = json.loads(line)  # a non-finite value is a string: float() reads it
        except json.JSONDecodeError:
            continue
        rows.append(
            MetricRow(
                scope=data["scope"],
                epoch=int(data["epoch"]),
                step=int(data["step"]),
                time=float(data.get("time", math.nan)),
                metrics={k: float(v) for k, v in data["metrics"].items()},
            )
        )
    return rows


def metric_series(
    rows: Sequence[MetricRow], scope: str
) -> dict[str, tuple[list[int], list[float]]]:
    """``{name: (x, values)}`` for one scope; x is the step (``"step"``) or epoch (``"epoch"``)."""
    series: dict[str, tuple[list[int], list[float]]] = {}
    for row in rows:
        if row["scope"] != scope:
            continue
        x = row["step"] if scope == "step" else row["epoch"]
        for name, value in row["metrics"].items():
            xs, ys = series.setdefault(name, ([], []))
            xs.append(x)
            ys.append(value)
    return series
