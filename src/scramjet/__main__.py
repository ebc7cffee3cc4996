"""``python -m scramjet``: the ``scramjet`` command, for environments without its script."""

from scramjet.cli import main

if __name__ == "__main__":  # importing this module (walking the package) runs nothing
    raise SystemExit(main())
