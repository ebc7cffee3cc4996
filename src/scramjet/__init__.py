"""scramjet: PyTorch training that is short to write, fast to run and easy to track."""

from __future__ import annotations

__version__ = "0.1.0"
