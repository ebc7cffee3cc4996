"""The ``scramjet`` command line.

Each subcommand lives in the module that owns the capability and exposes two functions,
``configure_parser(parser)`` and ``run(args) -> int``. Modules are imported only when
their subcommand is used, so ``scramjet --help`` stays fast and never imports torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# name -> (module implementing it, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("scramjet.demo.run", "generate data, pack it, train and track a small CNN end to end"),
    "pack": ("scramjet.data.cli", "pack image files listed in a CSV into sharded HDF5"),
    "launch": ("scramjet.runtime.cli", "run a training script on N processes / M nodes (torchrun)"),
    "runs": ("scramjet.tracking.cli_runs", "list tracked runs with their key metrics"),
    "report": ("scramjet.tracking.cli_report", "rebuild report.html for one run, or compare runs"),
}


def _top_parser() -> argparse.ArgumentParser:
    from scramjet import __version__

    parser = argparse.ArgumentParser(
        prog="scramjet",
        description="PyTorch training that is short to write, fast to run and easy to track.",
    )
    parser.add_argument("--version", action="version", version=f"scramjet {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in SUBCOMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``scramjet`` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in SUBCOMMANDS:
        parser = _top_parser()
        if not args:
            parser.print_help()
            return 0
        parser.parse_args(args)  # prints --help/--version, or an error naming the choices
        return 2
    name, rest = args[0], args[1:]
    module = importlib.import_module(SUBCOMMANDS[name][0])
    sub_parser = argparse.ArgumentParser(prog=f"scramjet {name}", description=SUBCOMMANDS[name][1])
    module.configure_parser(sub_parser)
    parsed = sub_parser.parse_args(rest)
    return int(module.run(parsed) or 0)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
