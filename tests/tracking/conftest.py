from __future__ import annotations

from s3_helpers import s3, s3_server  # noqa: F401  (fixtures)
