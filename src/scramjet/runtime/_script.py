"""Runs a user script inside each process started by ``scramjet launch``.

``python -m scramjet.runtime._script SCRIPT ARGS...`` behaves like ``python SCRIPT
ARGS...`` (and ``... _script -m MODULE ARGS...`` like ``python -m MODULE ARGS...``), but an uncaught exception is also recorded in torch elastic's error file, so
the launcher's summary names the failing rank *and* its error (the same as decorating
the script's ``main`` with ``torch.distributed.elastic.multiprocessing.errors.record``).
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Callable
from typing import Any


def main(argv: list[str]) -> None:
    """Run ``argv[0]`` (or the module after ``-m``) as ``__main__`` with ``argv`` as its
    ``sys.argv``."""
    from torch.distributed.elastic.multiprocessing.errors import record

    if argv[:1] == ["-m"]:
        module = argv[1]
        sys.argv = [module, *argv[2:]]
        sys.path[0] = os.getcwd()
        record(_exit_recorded(runpy.run_module, module))(
            module, run_name="__main__", alter_sys=True
        )
    else:
        script = argv[0]
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        record(_exit_recorded(runpy.run_path, script))(script, run_name="__main__")
    # A process group left open at interpreter exit can abort in gloo/NCCL teardown
    # ("terminate called without an active exception"); close it first.
    from scramjet.runtime.distributed import destroy_distributed

    destroy_distributed()


def _exit_recorded(run: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``run``, with a ``sys.exit(n)`` (n not 0) also recorded as this process's error.

    torch's ``record`` leaves a ``SystemExit`` unrecorded; the exit then closed the process
    group, a rank waiting on this one failed with 'Connection closed by peer', and the
    summary named that rank. The exit status is kept.
    """

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from scramjet.runtime.preemption import TrainingPreempted

        try:
            return run(*args, **kwargs)
        except SystemExit as exit:
            if exit.code not in (0, None) and not isinstance(exit, TrainingPreempted):
                from torch.distributed.elastic.multiprocessing.errors import get_error_handler

                called = RuntimeError(f"{name} called sys.exit({exit.code!r})")
                get_error_handler().record_exception(called)
            raise

    return wrapper


if __name__ == "__main__":
    main(sys.argv[1:])
