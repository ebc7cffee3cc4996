"""The ``scramjet`` command line.

Each subcommand lives in the module that owns the capability and exposes two functions,
``configure_parser(parser)`` and ``run(args) -> int``. Modules are imported only when
their subcommand is used, so ``scramjet --help`` stays fast and never imports torch.

Every subcommand exits with 0 on success and 2 for a bad option (a one-line error naming
it); Ctrl-C ends any of them with one line on stderr and status 130, and a reader that
stops early (``scramjet runs | head``) ends them quietly.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

#: Exit status after Ctrl-C (128 + SIGINT, what a shell reports for a process it stopped).
INTERRUPTED_EXIT_CODE = 130
#: Exit status when the reader of stdout went away (128 + SIGPIPE).
BROKEN_PIPE_EXIT_CODE = 141

# name -> (module implementing it, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("scramjet.demo.run", "generate data, pack it, train and track a small CNN end to end"),
    "pack": ("scramjet.data.cli", "pack image files listed in a CSV into sharded HDF5"),
    "launch": ("scramjet.runtime.cli", "run a training script on N processes / M nodes (torchrun)"),
    "runs": ("scramjet.tracking.cli_runs", "list tracked runs with their key metrics"),
    "report": ("scramjet.tracking.cli_report", "rebuild report.html for one run, or compare runs"),
}


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors also name the closest valid spelling of each
    mistyped command or option among ``typed`` (``--projcet``: did you mean ``--project``?)."""

    typed: Sequence[str] = ()

    def error(self, message: str) -> NoReturn:
        hints = _did_you_mean(self, self.typed)
        super().error(message + "".join(f"\n  {hint}" for hint in hints))


def _did_you_mean(parser: argparse.ArgumentParser, typed: Sequence[str]) -> list[str]:
    """``"--projcet: did you mean --project?"`` for each option in ``typed`` that ``parser``
    does not know (an unambiguous prefix of a known option counts as known), and for a
    command name that is not one of :data:`SUBCOMMANDS` on the top-level parser."""
    known = [s for action in parser._actions for s in action.option_strings]
    hints = []
    for token in typed:
        if token == "--":
            break
        if token.startswith("-") and len(token) > 1:
            name = token.split("=", 1)[0]
            if any(k.startswith(name) for k in known):
                continue
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        elif parser.prog == "scramjet" and token not in SUBCOMMANDS:
            name, close = token, difflib.get_close_matches(token, list(SUBCOMMANDS), n=1)
        else:
            continue
        if close:
            hints.append(f"{name}: did you mean {close[0]}?")
    return hints


def _top_parser() -> _Parser:
    from scramjet import __version__

    parser = _Parser(
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
        parser.typed = args[:1]
        parser.parse_args(args)  # prints --help/--version, or an error naming the choices
        return 2
    name, rest = args[0], args[1:]
    try:
        module = importlib.import_module(SUBCOMMANDS[name][0])
        sub_parser = _Parser(prog=f"scramjet {name}", description=SUBCOMMANDS[name][1])
        # launch passes what follows the script to the script: those are not its options
        sub_parser.typed = rest if name != "launch" else []
        module.configure_parser(sub_parser)
        parsed = sub_parser.parse_args(rest)
        return int(module.run(parsed) or 0)
    except KeyboardInterrupt:  # Ctrl-C: one line and the shell's status for SIGINT
        print(f"scramjet {name}: interrupted (Ctrl-C)", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    except Exception as error:
        if not _broken_pipe(error):
            raise
        _silence_stdout()  # the reader left (`scramjet runs | head`): stop quietly
        return BROKEN_PIPE_EXIT_CODE


def _broken_pipe(error: BaseException | None) -> bool:
    """Whether ``error`` is, or was caused by, a write to a pipe nobody reads any more (a
    callback that printed progress reports it wrapped in its own error)."""
    seen = 0
    while error is not None and seen < 16:
        if isinstance(error, BrokenPipeError):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that flushing it at exit raises nothing more."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a file descriptor (captured)
        pass


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
