from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tracking"))

from s3_helpers import s3, s3_server  # noqa: F401  (fixtures)
