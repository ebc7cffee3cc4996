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


def main(argv: list[str]) -> None:
    """Run ``argv[0]`` (or the module after ``-m``) as ``__main__`` with ``argv`` as its
    ``sys.argv``."""
    from torch.distributed.elastic.multiprocessing.errors import record

    if argv[:1] == ["-m"]:
        module = argv[1]
        sys.argv = [module, *argv[2:]]
        sys.path[0] = os.getcwd()
        record(runpy.run_module)(module, run_name="__main__", alter_sys=True)
    else:
        script = argv[0]
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        record(runpy.run_path)(script, run_name="__main__")
    # A process group left open at interpreter exit can abort in gloo/NCCL teardown
    # ("terminate called without an active exception"); close it first.
    from scramjet.runtime.distributed import destroy_distributed

    destroy_distributed()


if __name__ == "__main__":
    main(sys.argv[1:])
