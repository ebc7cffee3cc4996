"""Small helpers of the run folder: atomic JSON, environment capture, unique folder names."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from scramjet.checkpoint.payload import unwrap
from scramjet.runtime.files import atomic_write, atomic_write_bytes, atomic_write_text
from scramjet.runtime.processes import pid_alive
from scramjet.tracking import _json as strict_json
from scramjet.tracking.storage import UploadReport, is_manifest, unchecked_entry

if TYPE_CHECKING:
    from scramjet.tracking.storage import RunStorage
    from scramjet.tracking.upload_process import ProcessRunStorage

_PACKAGES = (
    "scramjet",
    "torch",
    "numpy",
    "torchmetrics",
    "fsspec",
    "s3fs",
    "gcsfs",
    "matplotlib",
    "tensorboard",
    "mlflow-skinny",
    "safetensors",
    "scikit-learn",
)


def write_json(path: Path, data: Any) -> str:
    """Write ``data`` as indented strict JSON, atomically and durably (values JSON lacks as
    ``str``; a non-finite float as ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``); returns
    the text written."""
    text = strict_json.dumps(data, indent=2, sort_keys=True, default=str)
    atomic_write_text(path, text)
    return text


def read_json(path: Path) -> Any:
    """JSON content of ``path`` (non-finite numbers as floats), or ``{}`` when it is
    missing or unreadable."""
    try:
        return strict_json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}


#: The longest name, in UTF-8 bytes, of each kind that becomes part of a file name (file
#: names hold 255 bytes): a project is one folder; a run folder adds ``_<time>_<6 hex>``
#: to its experiment; a results name gets ``_predictions.json`` (200 leaves room to spare).
MAX_NAME_BYTES = {"project": 255, "experiment": 255 - 23, "results": 200}


def check_name(value: str, what: str, kind: str, example: str = "mnist-mlp") -> str:
    """A name of ``kind`` (a key of ``MAX_NAME_BYTES``) usable as one file or folder name."""
    if (
        not isinstance(value, str)
        or not value
        or value in (".", "..")
        or any(c in value for c in "/\\\0")
    ):
        raise ValueError(
            f"{what} must be a non-empty name without '/', '\\' or NUL; received {value!r}. "
            f"Use a plain name such as {example!r}."
        )
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES[kind]:
        raise ValueError(
            f"{what} is too long to be part of a file name: received {value[:40]!r}... "
            f"({size} bytes in UTF-8); at most {MAX_NAME_BYTES[kind]} bytes are allowed. "
            f"Use a shorter name such as {example!r}."
        )
    return value


def create_run_dir(root: Path, project: str, experiment: str) -> Path:
    """Create ``<root>/<project>/<experiment>_<YYYYmmdd-HHMMSS>_<6 hex>/`` (never an existing one)."""
    parent = root / project
    parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for _ in range(1000):
        path = parent / f"{experiment}_{stamp}_{uuid.uuid4().hex[:6]}"
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise RuntimeError(f"could not create a unique run folder under {parent}")


def is_run_folder(path: Path) -> bool:
    """Whether ``path`` is a run folder written by an Experiment (``run.json`` or
    ``hyperparams.json`` in it)."""
    return (path / "run.json").is_file() or (path / "hyperparams.json").is_file()


def live_owner(run: Path) -> int | None:
    """The pid of another live process on this host that is training in ``run`` (its
    ``run.json`` says ``running``), or None: finished, crashed, this process or another host."""
    info = read_json(run / "run.json")
    if not isinstance(info, dict) or info.get("status") != "running":
        return None
    pid, host = info.get("pid"), info.get("host")
    if not isinstance(pid, int) or pid == os.getpid() or host != socket.gethostname():
        return None
    return pid if pid_alive(pid) else None


def run_status(info: Any) -> str:
    """A run's status from its ``run.json`` values: the recorded one, except that a
    ``running`` run whose process on this host is gone has ``crashed`` (``unknown``
    when nothing is recorded). ``scramjet runs`` and the report pages show this."""
    if not isinstance(info, dict):
        return "unknown"
    status = str(info.get("status") or "unknown")
    pid, host = info.get("pid"), info.get("host")
    gone = isinstance(pid, int) and host == socket.gethostname() and not pid_alive(pid)
    return "crashed" if status == "running" and gone else status


def is_run_of(name: str, experiment: str) -> bool:
    """Whether the folder ``name`` is a run of ``experiment``, named as
    :func:`create_run_dir` names it. ``mlp_big_20250101-120000_3fa9c1`` is a run of
    ``mlp_big``, not of ``mlp``: a plain prefix test would take it for both."""
    if not name.startswith(experiment):
        return False
    return _RUN_SUFFIX.fullmatch(name[len(experiment) :]) is not None


_RUN_SUFFIX = re.compile(r"_\d{8}-\d{6}_[0-9a-f]{6}")


def _started(run: Path) -> float:
    info = read_json(run / "run.json")
    started = info.get("started") if isinstance(info, dict) else None
    return float(started) if isinstance(started, int | float) else 0.0


def latest_run(root: Path, project: str, experiment: str) -> Path | None:
    """Newest run folder of ``experiment`` (by the start time its ``run.json`` records,
    then the time stamp in its name), or None. Runs of other experiments of the project
    are never picked, whatever their names share."""
    parent = root / project
    if not parent.is_dir():
        return None
    found = [p for p in parent.iterdir() if p.is_dir() and is_run_of(p.name, experiment)]
    found.sort(key=lambda p: (_started(p), p.name))
    return found[-1] if found else None


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_commit(where: Path | None = None) -> str | None:
    """The commit checked out in the repository holding ``where`` (default: cwd), or None."""
    return _git(["rev-parse", "HEAD"], where or Path.cwd())


def launch_script() -> Path | None:
    """The file of the ``__main__`` module, if the process was started from a script."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    return Path(path).resolve() if path and Path(path).is_file() else None


def cpu_model_name() -> str:
    """This machine's CPU model (``/proc/cpuinfo`` on Linux, else what ``platform`` knows)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(seed: int | None, device: torch.device, world_size: int) -> dict[str, Any]:
    """Package versions, git commit, command line, seed and devices of this process."""
    packages = {}
    for name in _PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    script = launch_script()
    where = script.parent if script else Path.cwd()
    commit = git_commit(where)
    env: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": packages,
        "command_line": [sys.executable, *sys.argv],
        "cwd": str(Path.cwd()),
        "script": str(script) if script else None,
        "git": {"commit": commit, "dirty": bool(_git(["status", "--porcelain"], where))}
        if commit
        else None,
        "seed": None if seed is None else int(seed),  # a NumPy integer as a number
        "device": str(device),
        "world_size": world_size,
        "cuda_devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "cpu_model": cpu_model_name(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    return env


def copy_script(run_dir: Path, script: Path | None) -> Path | None:
    """Copy the launching script to ``<run>/code/`` (returns the copy)."""
    if script is None or not script.is_file():
        return None
    target = run_dir / "code" / script.name
    target.parent.mkdir(exist_ok=True)
    shutil.copy2(script, target)
    return target


def save_weights(
    model: torch.nn.Module, folder: Path, full_state: dict[str, Any] | None = None
) -> list[Path]:
    """``model.pt`` (a state dict for ``torch.load(weights_only=True)``) and, when the
    safetensors extra is installed, ``model.safetensors``. ``full_state``: the weights of
    a sharded model, gathered beforehand (its own state dict holds only this rank's)."""
    folder.mkdir(exist_ok=True)
    # The plain module's keys (no "_orig_mod." from torch.compile, no "module." from DDP),
    # so the files load into the model as the user built it, as checkpoints do.
    plain: torch.nn.Module = unwrap(model)
    source = plain.state_dict() if full_state is None else full_state
    state = {k: v.detach().cpu().clone().contiguous() for k, v in source.items()}
    written = [folder / "model.pt"]
    atomic_write(written[0], lambda file: torch.save(state, file), fsync=False)
    try:
        from safetensors.torch import save
    except ImportError:
        return written
    written.append(folder / "model.safetensors")
    atomic_write_bytes(written[1], save(state), fsync=False)
    return written


def last_written(run: Path) -> float | None:
    """When the run's processes last wrote ``metrics.csv`` or ``run.json`` (None: neither)."""
    written = [p.stat().st_mtime for p in (run / "metrics.csv", run / "run.json") if p.exists()]
    return max(written, default=None)


def begin_session(
    info: dict[str, Any], run: Path, resumed: bool, written: float | None = None
) -> None:
    """Note in ``run.json``'s ``info`` that a process starts (or resumes) the run.

    ``duration`` counts the time processes ran, not the time a killed run waited to be
    resumed: an earlier session ended when its ``run.json`` says, or, killed without a
    word (``kill -9``), when it last wrote a metric row or ``run.json``. ``written`` is
    that time as read before this process wrote anything in the folder (opening the MLflow
    or W&B logger rewrites ``run.json``); None reads it now.
    """
    now = time.time()
    if resumed:
        info.setdefault("resumed", []).append(now)
        start = info.get("session_started", info.get("started"))
        end = info.get("ended")
        if not isinstance(end, int | float):
            end = written if written is not None else last_written(run)
        earlier = info.get("earlier_sessions_s", 0.0)
        if isinstance(start, int | float) and isinstance(end, int | float) and end > start:
            info["earlier_sessions_s"] = round(float(earlier) + end - start, 3)
    info["session_started"] = now


def mark_ended(info: dict[str, Any], status: str) -> None:
    """Status, end time (``finished`` and ``ended``) and ``duration`` (s) in ``run.json``:
    the time the run's processes ran (see :func:`begin_session`)."""
    now = time.time()
    info.update(status=status, finished=now, ended=now)
    started = info.get("session_started", info.get("started"))
    if isinstance(started, int | float):
        earlier = info.get("earlier_sessions_s", 0.0)
        info["duration"] = round(float(earlier) + now - started, 3)


def record_end(run_dir: Path, status: str, error: BaseException | None, **fields: Any) -> None:
    """Mark ``run_dir/run.json`` ended with ``status``, the error's text (if any) and
    ``fields``, keeping what the file already says."""
    path = run_dir / "run.json"
    info = read_json(path)
    info.setdefault("started", time.time())
    info.update(fields)
    if error is not None:
        text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        info["error"] = text[:500]
    mark_ended(info, status)
    write_json(path, info)


def artifact_files(run: Path) -> list[str]:
    """The files loggers keep copies of: the report, the results and the final model."""
    found = [p for p in (run / "report.html",) if p.is_file()]
    found += sorted((run / "results").glob("*.json"))
    found += sorted(p for p in (run / "model").glob("model.*") if p.is_file())
    return [p.relative_to(run).as_posix() for p in found]


def not_a_run_message(resume: str, path: Path, root: Path, project: str, experiment: str) -> str:
    """The error for ``Experiment(resume=path)`` where ``path`` is no run folder."""
    what = "holds no run.json or hyperparams.json" if path.is_dir() else "no such folder"
    hint = ""
    for parent in path.resolve().parents:
        if is_run_folder(parent):  # e.g. the run's checkpoints folder
            hint = f" It is inside the run folder {str(parent)!r}: pass that folder."
            break
    return (
        f"resume={resume!r} is not a run folder ({what}); an Experiment "
        f"continues only a folder it created, and nothing was written.{hint} Pass a "
        f"folder under {str(root / project)!r} (`scramjet runs {root}` "
        f"lists them), resume='latest' for the newest run of {experiment!r}, or "
        f"resume=None for a new run."
    )


def in_use_message(path: Path, pid: int) -> str:
    """The error for continuing a run folder another live process trains in."""
    return (
        f"The run folder {str(path)!r} is in use: its run.json says 'running' and its "
        f"process (pid {pid}) on this host is alive. Two processes writing one run "
        f"folder would mix their metrics and checkpoints, so nothing was written. Wait "
        f"for that run to end (or stop it) before resuming it, or pass resume=None for "
        f"a new run."
    )


def sync_run(
    storage: RunStorage | ProcessRunStorage, run_dir: Path, finished: dict[str, Any] | None
) -> UploadReport:
    """Final sync of a run folder and its manifest; ``finished``: the run.json of a finished
    run, marked ``upload-failed`` (locally, and so in the manifest) when the upload failed."""
    report = storage.finish(exclude=is_manifest)
    if finished is not None and not report.ok:
        error = report.error or f"not verified: {', '.join(report.failures[:5])}"
        finished.update(status="upload-failed", upload_error=error)
        write_json(run_dir / "run.json", finished)
        report.files["run.json"] = unchecked_entry(
            run_dir / "run.json", "rewritten after the upload failed"
        )
        report.failures = sorted({*report.failures, "run.json"})
    write_json(
        run_dir / "manifest.json",
        {
            "remote": report.remote,
            "ok": report.ok,
            "failures": report.failures,
            "files": report.files,
            "verified_at": time.time(),
            "failed_attempts": report.failed_attempts,
            **({"error": report.error} if report.error else {}),
        },
    )
    storage.upload("manifest.json")
    storage.wait()
    if report.ok and storage.verify("manifest.json")["status"] != "verified":
        report.ok, report.failures = False, ["manifest.json"]
    return report
