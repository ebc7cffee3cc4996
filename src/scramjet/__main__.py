"""``python -m scramjet``: the ``scramjet`` command, for environments without its script."""

from scramjet.cli import main

raise SystemExit(main())
