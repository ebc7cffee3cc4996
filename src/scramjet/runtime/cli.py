"""``scramjet launch``: run a training script on N processes / M nodes through torchrun.

Examples::

    scramjet launch --nproc-per-node 4 train.py --epochs 10
    # on each of two machines (node rank 0 and 1):
    scramjet launch --nnodes 2 --node-rank 0 --nproc-per-node 8 \\
        --master-addr 10.0.0.1 --master-port 29500 train.py

On one node the rendezvous port is picked by the operating system (torchrun
``--standalone``), so concurrent runs on a machine never collide. Across nodes every
node must name the same ``--master-addr`` and ``--master-port``, or the same
``--rdzv-endpoint`` (torch elastic's c10d rendezvous; ``--nnodes MIN:MAX`` for an elastic
number of nodes).

``--max-restarts N`` lets torch's elastic agent restart the whole group after a failure
(each round with a fresh rendezvous store). The exit status is 0 on success, 1 when a
process failed, 2 for bad options and 143 when the run was preempted (the workers saved and
stopped on ``SIGTERM``, or the launcher itself received ``SIGTERM`` or ``SIGUSR1``): run the
command again to resume. Ctrl-C stops the workers and exits with 130.

``SIGUSR1`` (the advance notice of Slurm's ``--signal=USR1@120``) is passed to the workers
as ``SIGTERM``, so they save and stop; torch's agent alone would die of it and leave the
workers training without it.

torchrun's spellings are accepted as written: ``--nproc_per_node``, ``--node_rank``,
``--master_addr``, ``--rdzv_endpoint``... and ``-m``/``--module`` to run a module instead of
a script file, so a torchrun command line works after replacing ``torchrun`` by
``scramjet launch``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, cast

from scramjet.runtime.preemption import PREEMPTED_EXIT_CODE

__all__ = ["build_torchrun_argv", "configure_parser", "run"]

DEFAULT_MULTI_NODE_PORT = 29500
_RUNNER = "scramjet.runtime._script"  # the module torchrun starts; it runs the script
DEFAULT_JOIN_TIMEOUT = 600  # torch elastic's c10d rendezvous waits this long for the nodes


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the ``scramjet launch`` options to ``parser``.

    Args:
        parser: The sub-command parser created by ``scramjet.cli``.
    """
    parser.allow_abbrev = False  # the script's --n 63 is its own, no prefix of --nnodes
    add = parser.add_argument
    add(
        "--nproc-per-node",
        "--nproc_per_node",
        dest="nproc_per_node",
        default="1",
        help="processes per node: a number, 'gpu' (one per GPU), 'cpu' or 'auto' (default 1)",
    )
    add("--nnodes", default="1", help="number of nodes, or MIN:MAX for elastic (default 1)")
    add(
        "--node-rank",
        "--node_rank",
        dest="node_rank",
        type=int,
        default=0,
        help="rank of this node",
    )
    add(
        "--master-addr",
        "--master_addr",
        dest="master_addr",
        default=None,
        help="address of node 0 (required with --nnodes > 1 unless --rdzv-endpoint is given)",
    )
    add(
        "--master-port",
        "--master_port",
        dest="master_port",
        type=int,
        default=None,
        help=f"port on node 0 (default: a free port on one node, {DEFAULT_MULTI_NODE_PORT} "
        "across nodes)",
    )
    add("--rdzv-endpoint", "--rdzv_endpoint", dest="rdzv_endpoint", default=None, help="HOST:PORT")
    add("--rdzv-backend", "--rdzv_backend", dest="rdzv_backend", default=None, help="e.g. c10d")
    add("--rdzv-id", "--rdzv_id", dest="rdzv_id", default=None, help="run id shared by all nodes")
    add(
        "--rdzv-conf",
        "--rdzv_conf",
        dest="rdzv_conf",
        default=None,
        help="KEY=VALUE,... for the c10d rendezvous, e.g. join_timeout=120 (seconds the "
        f"started nodes wait for the others; default {DEFAULT_JOIN_TIMEOUT})",
    )
    add("--standalone", action="store_true", help="one node, free port (the default on one node)")
    add(
        "--max-restarts",
        "--max_restarts",
        dest="max_restarts",
        type=int,
        default=0,
        help="restarts of the worker group on failure (a script that trains with "
        "resume_from='auto' continues from its newest checkpoint)",
    )
    add("-m", "--module", action="store_true", help="SCRIPT is a module name (python -m)")
    add("script", nargs="?", help="the Python script (or, with -m, module) to run in every process")
    add("script_args", nargs=argparse.REMAINDER, help="arguments passed to the script")


def _nnodes(value: str) -> tuple[int, int]:
    """``"N"`` or ``"MIN:MAX"`` as (min, max)."""
    parts = value.split(":")
    try:
        low, high = (int(parts[0]), int(parts[-1])) if len(parts) <= 2 else (0, -1)
    except ValueError:
        low, high = 0, -1
    if low < 1 or high < low:
        raise ValueError(f"--nnodes must be a number >= 1 or MIN:MAX, got {value!r}")
    return low, high


def _check_nproc(value: str) -> None:
    if value in ("cpu", "auto"):
        return
    if value == "gpu":
        import torch

        if not torch.cuda.is_available():
            raise ValueError(
                "--nproc-per-node gpu starts one process per GPU, but no CUDA GPU is visible; "
                "pass a number (e.g. --nproc-per-node 2) or 'cpu'"
            )
        return
    if not value.isdigit() or int(value) < 1:
        raise ValueError(
            f"--nproc-per-node must be a number >= 1, 'gpu', 'cpu' or 'auto', got {value!r}"
        )


def _check_rendezvous(args: argparse.Namespace, high: int) -> None:
    """Refuse rendezvous options that the chosen form would silently drop."""
    backend = getattr(args, "rdzv_backend", None)
    if not args.rdzv_endpoint:
        # Without an endpoint the nodes meet on --master-addr with a static rendezvous, where
        # node ranks come from --node-rank: a c10d backend or a run id would be dropped, and
        # every node would default to node rank 0 and wait for the others.
        if backend not in (None, "static"):
            raise ValueError(
                f"--rdzv-backend {backend} needs --rdzv-endpoint HOST:PORT (the same on every "
                "node, e.g. --rdzv-endpoint 10.0.0.1:29400); or leave --rdzv-backend out and "
                "give each node --master-addr and its own --node-rank"
            )
        for option, value in (("--rdzv-id", args.rdzv_id), ("--rdzv-conf", args.rdzv_conf)):
            if value:
                raise ValueError(
                    f"{option} {value} is only used with --rdzv-endpoint HOST:PORT (torch "
                    f"elastic's c10d rendezvous); add it, or leave {option} out"
                )
    _join_timeout(args.rdzv_conf)
    if getattr(args, "standalone", False) and (
        high > 1 or args.master_addr or args.master_port is not None or args.rdzv_endpoint
    ):
        raise ValueError(
            "--standalone runs one node on a free local port; it cannot be combined with "
            "--nnodes > 1, --master-addr, --master-port or --rdzv-endpoint: leave out "
            "--standalone, or those options"
        )


def _join_timeout(conf: str | None) -> float:
    """The c10d join timeout in seconds that ``--rdzv-conf`` sets (torch's default if none);
    a ValueError for a malformed ``--rdzv-conf``."""
    if conf is None:
        return DEFAULT_JOIN_TIMEOUT
    settings: dict[str, str] = {}
    for item in conf.split(","):
        key, sep, value = item.partition("=")
        if not (sep and key.strip() and value.strip()):
            raise ValueError(
                f"--rdzv-conf must be KEY=VALUE pairs separated by commas, got {conf!r} "
                "(e.g. --rdzv-conf join_timeout=120)"
            )
        settings[key.strip()] = value.strip()
    value = settings.get("join_timeout", str(DEFAULT_JOIN_TIMEOUT))
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ValueError(
            f"--rdzv-conf join_timeout must be a number of seconds > 0, got {value!r} "
            "(e.g. --rdzv-conf join_timeout=120)"
        )
    return seconds


def build_torchrun_argv(args: argparse.Namespace) -> list[str]:
    """Translate parsed ``scramjet launch`` options into ``torch.distributed.run`` arguments.

    Args:
        args: Namespace from the parser built by :func:`configure_parser`.

    Returns:
        The argument list for torchrun, ending with the script and its arguments.

    Raises:
        ValueError: Inconsistent options (the message says which and how to fix it).
    """
    low, high = _nnodes(str(args.nnodes))
    if not 0 <= args.node_rank < high:
        raise ValueError(f"--node-rank must be in 0..{high - 1}, got {args.node_rank}")
    _check_nproc(str(args.nproc_per_node))
    if args.master_port is not None and not 0 < args.master_port < 65536:
        raise ValueError(
            f"--master-port must be a TCP port from 1 to 65535, got {args.master_port}; "
            "leave it out on one node (a free port is picked)"
        )
    if args.max_restarts < 0:
        raise ValueError(f"--max-restarts must be >= 0, got {args.max_restarts}")
    _check_rendezvous(args, high)
    argv = [f"--nproc-per-node={args.nproc_per_node}", f"--max-restarts={args.max_restarts}"]
    nodes = f"{low}:{high}" if low != high else str(low)
    if args.rdzv_endpoint:
        argv += [
            f"--nnodes={nodes}",
            f"--rdzv-backend={args.rdzv_backend or 'c10d'}",
            f"--rdzv-endpoint={args.rdzv_endpoint}",
        ]
        argv += [f"--rdzv-id={args.rdzv_id}"] if args.rdzv_id else []
        argv += [f"--rdzv-conf={args.rdzv_conf}"] if args.rdzv_conf else []
    elif high == 1 and args.master_addr is None and args.master_port is None:
        argv.append("--standalone")  # c10d rendezvous on localhost, port chosen by the OS
    else:
        if high > 1 and not args.master_addr:
            raise ValueError(
                f"--nnodes {nodes} needs --master-addr (the address of node 0, the same on "
                "every node) or --rdzv-endpoint HOST:PORT"
            )
        if high > 1 and args.max_restarts:
            # The static rendezvous hands a restarted round the store of the dead one
            # (torch shares it whatever TORCH_DISABLE_SHARE_RDZV_TCP_STORE says): the new
            # group fails with 'connectFullMesh ... Connection refused', or hangs.
            addr = args.master_addr
            raise ValueError(
                f"--max-restarts {args.max_restarts} on {nodes} nodes needs the c10d "
                f"rendezvous, which starts each round afresh: give every node "
                f"--rdzv-endpoint {addr}:{args.master_port or DEFAULT_MULTI_NODE_PORT} "
                f"(and the same --rdzv-id) instead of --master-addr/--master-port/--node-rank"
            )
        port = args.master_port if args.master_port is not None else DEFAULT_MULTI_NODE_PORT
        argv += [
            f"--nnodes={nodes}",
            f"--node-rank={args.node_rank}",
            f"--master-addr={args.master_addr or '127.0.0.1'}",
            f"--master-port={port}",
        ]
    script_args = list(args.script_args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
    target = ["-m", args.script] if getattr(args, "module", False) else [args.script]
    # The runner module makes an uncaught exception show up in the launcher's summary.
    return [*argv, "--module", _RUNNER, *target, *script_args]


def _preempted(error: Any) -> bool:
    """Whether the workers stopped on preemption: one ended with status 143 (saved and
    stopped) and every other failed one did too, or was ended by the agent's ``SIGTERM``
    afterwards (the checkpoint is complete before any rank leaves ``train()``)."""
    codes = {getattr(failure, "exitcode", None) for failure in error.failures.values()}
    return PREEMPTED_EXIT_CODE in codes and codes <= {PREEMPTED_EXIT_CODE, -signal.SIGTERM}


def _checked_script(args: argparse.Namespace) -> argparse.Namespace:
    """``args``, once its script is given and exists (a ValueError that says what to pass)."""
    if args.script is None:
        raise ValueError(
            "no script to run; usage: scramjet launch [options] train.py [script arguments] "
            "(see scramjet launch --help)"
        )
    if not args.module and Path(args.script).is_dir():
        raise ValueError(
            f"script {args.script!r} is a folder; pass the Python file to run in it "
            "(e.g. train.py), or -m and a module name"
        )
    if not args.module and not Path(args.script).is_file():
        raise ValueError(f"script {args.script!r} does not exist (to run a module, pass -m)")
    if args.module:
        _check_module(args.script)
    return args


def _check_module(name: str) -> None:
    """Raise a ValueError when ``python -m name``, run from this folder as the workers run
    it, could not find the module's top-level package (nothing is imported)."""
    import importlib.util

    if name.endswith(".py") and Path(name).is_file():
        raise ValueError(
            f"-m {name}: {name!r} is a script file, not a module name; run it without -m "
            f"(scramjet launch {name}), or give its module name (-m {name[:-3]})"
        )
    top = name.split(".")[0]
    sys.path.insert(0, os.getcwd())  # the workers look in the working folder first
    try:
        found = top in sys.modules or importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        found = False
    finally:
        sys.path.pop(0)
    if not found:
        raise ValueError(
            f"-m {name}: no module named {top!r} in the working folder {os.getcwd()} or on the "
            "Python path; check the name, run from the folder that holds it (or add that "
            "folder to PYTHONPATH), or pass a script file without -m"
        )


class _NoticeAsSigterm:
    """While the launcher runs, ``SIGUSR1`` is turned into ``SIGTERM`` to itself: torch's
    agent forwards that to the workers (which save and stop) and raises ``SignalException``."""

    def __init__(self) -> None:
        self.received = False
        self._previous: Any = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received = True
        os.kill(os.getpid(), signal.SIGTERM)

    def __enter__(self) -> _NoticeAsSigterm:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGUSR1, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGUSR1, self._previous)


def run(args: argparse.Namespace) -> int:
    """Start the processes and wait for them.

    Args:
        args: Namespace from the parser built by :func:`configure_parser`.

    Returns:
        0 when every process succeeded, 1 when one failed (its rank and error are printed),
        2 for bad options, 143 when the run was preempted (every failed worker saved and
        stopped with status 143, or the launcher itself received ``SIGTERM`` or
        ``SIGUSR1``), 130 on Ctrl-C.
    """
    try:
        argv = build_torchrun_argv(_checked_script(args))
    except ValueError as error:
        print(f"scramjet launch: error: {error}", file=sys.stderr)
        return 2
    from torch.distributed import run as torch_run
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    # torch.distributed.run's parse_args and run are unannotated.
    parse_args = cast("Callable[[list[str]], argparse.Namespace]", torch_run.parse_args)
    torchrun = cast("Callable[[argparse.Namespace], None]", torch_run.run)
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.rendezvous.api import RendezvousTimeoutError

    from scramjet.runtime.launch import _fresh_store_per_round

    _fresh_store_per_round()
    notice = _NoticeAsSigterm()
    # The processes' error files go in a folder of this launch, removed when it ends
    # (torchrun's default is a new ``torchelastic_*`` temp folder per launch, never removed).
    log_dir = tempfile.mkdtemp(prefix="scramjet-launch-")
    try:
        with notice:
            torchrun(_torchrun_args(parse_args, [f"--log-dir={log_dir}", *argv]))
    except ChildFailedError as error:
        from scramjet.runtime.launch import _launch_error

        if _preempted(error):
            print(
                f"scramjet launch: preempted: the workers saved their training state and "
                f"stopped (exit status {PREEMPTED_EXIT_CODE}); run the same command again "
                "to resume (resume_from='auto')",
                file=sys.stderr,
            )
            return PREEMPTED_EXIT_CODE
        failed = _launch_error(error)
        print(f"scramjet launch: {failed}", file=sys.stderr)
        return 1
    except SignalException as error:  # the launcher itself was told to stop (preemption)
        return _stopped_by(error.sigval, notice)
    except RendezvousTimeoutError:
        print(f"scramjet launch: error: {_missing_nodes(args)}", file=sys.stderr)
        return 1
    except Exception as error:  # the launcher itself failed: rendezvous, bad settings
        print(
            f"scramjet launch: error: the launcher failed before or between runs: "
            f"{type(error).__name__}: {error or 'no message'}{_port_hint(error, args)}",
            file=sys.stderr,
        )
        return 1
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
    return 0


def _torchrun_args(
    parse_args: Callable[[list[str]], argparse.Namespace], argv: list[str]
) -> argparse.Namespace:
    """torchrun's options parsed without the script's arguments, which are set as they
    are: torchrun's parser would read a script option such as ``--n 63`` as an ambiguous
    abbreviation of its own (``--nnodes``, ``--nproc-per-node``...) and exit."""
    cut = argv.index(_RUNNER) + 1
    args = parse_args(argv[:cut])
    args.training_script_args = argv[cut:]
    return args


def _stopped_by(sigval: signal.Signals, notice: _NoticeAsSigterm) -> int:
    """Say why the launcher stopped on a signal; its exit status (130 for Ctrl-C, else 143)."""
    if sigval == signal.SIGINT:  # Ctrl-C: no checkpoint is promised
        print("scramjet launch: interrupted (Ctrl-C); the workers were stopped", file=sys.stderr)
        return 130
    name = sigval.name
    if notice.received and sigval == signal.SIGTERM:
        name = "SIGUSR1 (passed on as SIGTERM)"
    print(
        f"scramjet launch: stopped by {name}: the workers were sent {sigval.name} (a Trainer "
        "with SaveTrainingStateCallback saves at its next step); run the same command again "
        "to resume (resume_from='auto')",
        file=sys.stderr,
    )
    return PREEMPTED_EXIT_CODE


def _missing_nodes(args: argparse.Namespace) -> str:
    """What a rendezvous timeout means: which nodes were awaited, and the setting to change."""
    low, high = _nnodes(str(args.nnodes))
    needed = f"{low} node(s)" if low == high else f"at least {low} of {high} node(s)"
    if not args.rdzv_endpoint:  # static rendezvous on --master-addr: torch's own timeout
        return (
            f"{needed} must meet at {args.master_addr}, but fewer had joined when the "
            "rendezvous timed out, so no process of the script started. Start `scramjet "
            "launch` with the same --master-addr, --master-port and --nnodes and its own "
            "--node-rank on every node, and check that each node can reach that address"
        )
    return (
        f"{needed} must join the rendezvous at {args.rdzv_endpoint}, but fewer had joined after "
        f"the join timeout of {_join_timeout(args.rdzv_conf):g} s, so no process of the script "
        "started. Start `scramjet launch` with the same --rdzv-endpoint and --nnodes on every "
        "node (check that each node can reach that address), or wait longer with --rdzv-conf "
        "join_timeout=SECONDS"
    )


def _port_hint(error: Exception, args: argparse.Namespace) -> str:
    """How to fix a rendezvous port that another program (or another run) holds."""
    if "EADDRINUSE" not in str(error) and "address already in use" not in str(error):
        return ""
    if args.rdzv_endpoint:
        where, option = f"--rdzv-endpoint {args.rdzv_endpoint}", "--rdzv-endpoint HOST:PORT"
    else:
        port = args.master_port if args.master_port is not None else DEFAULT_MULTI_NODE_PORT
        where, option = f"--master-port {port}", "--master-port"
    return (
        f". The port of {where} is taken on this machine (another run, or one still "
        f"ending): pass another free port with {option}, the same on every node; on one "
        "node, leave out --master-addr and --master-port and a free port is picked"
    )
