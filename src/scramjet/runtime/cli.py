"""``scramjet launch``: run a training script on N processes / M nodes through torchrun.

Examples::

    scramjet launch --nproc-per-node 4 train.py --epochs 10
    # on each of two machines (node rank 0 and 1):
    scramjet launch --nnodes 2 --node-rank 0 --nproc-per-node 8 \\
        --master-addr 10.0.0.1 --master-port 29500 train.py

On one node the rendezvous port is picked by the operating system (torchrun
``--standalone``), so concurrent runs on a machine never collide. Across nodes every
node must name the same ``--master-addr`` and ``--master-port``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

__all__ = ["build_torchrun_argv", "configure_parser", "run"]

DEFAULT_MULTI_NODE_PORT = 29500


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the ``scramjet launch`` options to ``parser``.

    Args:
        parser: The sub-command parser created by ``scramjet.cli``.
    """
    parser.add_argument(
        "--nproc-per-node",
        default="1",
        help="processes per node: a number, 'gpu' (one per GPU), 'cpu' or 'auto' (default 1)",
    )
    parser.add_argument("--nnodes", type=int, default=1, help="number of nodes (default 1)")
    parser.add_argument("--node-rank", type=int, default=0, help="rank of this node (0..M-1)")
    parser.add_argument(
        "--master-addr", default=None, help="address of node 0 (required with --nnodes > 1)"
    )
    parser.add_argument(
        "--master-port",
        type=int,
        default=None,
        help=f"port on node 0 (default: a free port on one node, {DEFAULT_MULTI_NODE_PORT} "
        "across nodes)",
    )
    parser.add_argument(
        "--max-restarts", type=int, default=0, help="restarts of the worker group on failure"
    )
    parser.add_argument("script", help="the Python script to run in every process")
    parser.add_argument(
        "script_args", nargs=argparse.REMAINDER, help="arguments passed to the script"
    )


def build_torchrun_argv(args: argparse.Namespace) -> list[str]:
    """Translate parsed ``scramjet launch`` options into ``torch.distributed.run`` arguments.

    Args:
        args: Namespace from the parser built by :func:`configure_parser`.

    Returns:
        The argument list for torchrun, ending with the script and its arguments.

    Raises:
        ValueError: Inconsistent options (the message says which and how to fix it).
    """
    if args.nnodes < 1:
        raise ValueError(f"--nnodes must be >= 1, got {args.nnodes}")
    if not 0 <= args.node_rank < args.nnodes:
        raise ValueError(f"--node-rank must be in 0..{args.nnodes - 1}, got {args.node_rank}")
    argv = [f"--nproc-per-node={args.nproc_per_node}", f"--max-restarts={args.max_restarts}"]
    if args.nnodes == 1 and args.master_addr is None and args.master_port is None:
        argv.append("--standalone")  # c10d rendezvous on localhost, port chosen by the OS
    else:
        if args.nnodes > 1 and not args.master_addr:
            raise ValueError(
                f"--nnodes {args.nnodes} needs --master-addr (the address of node 0, the "
                "same on every node)"
            )
        port = args.master_port if args.master_port is not None else DEFAULT_MULTI_NODE_PORT
        argv += [
            f"--nnodes={args.nnodes}",
            f"--node-rank={args.node_rank}",
            f"--master-addr={args.master_addr or '127.0.0.1'}",
            f"--master-port={port}",
        ]
    script_args = list(args.script_args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
    # The runner module makes an uncaught exception show up in the launcher's summary.
    return [*argv, "--module", "scramjet.runtime._script", args.script, *script_args]


def run(args: argparse.Namespace) -> int:
    """Start the processes and wait for them.

    Args:
        args: Namespace from the parser built by :func:`configure_parser`.

    Returns:
        0 when every process succeeded, 1 when one failed (its rank and error are printed),
        2 for bad options.
    """
    if not Path(args.script).is_file():
        print(f"scramjet launch: script {args.script!r} does not exist", file=sys.stderr)
        return 2
    try:
        argv = build_torchrun_argv(args)
    except ValueError as error:
        print(f"scramjet launch: {error}", file=sys.stderr)
        return 2
    from torch.distributed import run as torch_run
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    # torch.distributed.run's parse_args and run are unannotated.
    parse_args = cast("Callable[[list[str]], argparse.Namespace]", torch_run.parse_args)
    torchrun = cast("Callable[[argparse.Namespace], None]", torch_run.run)
    try:
        torchrun(parse_args(argv))
    except ChildFailedError as error:
        from scramjet.runtime.launch import _launch_error

        failed = _launch_error(error)
        print(f"scramjet launch: {failed}", file=sys.stderr)
        return 1
    return 0
