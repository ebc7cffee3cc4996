"""Store access for streamed packs: fsspec filesystems (one per process, protocol,
options and credentials environment), retries with backoff, the errors a store's answer
becomes, and the size and cache-folder settings a reader is given."""

from __future__ import annotations

import hashlib
import logging
import math
import numbers
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS.update({"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40})


class ShardDownloadError(OSError):
    """A file of a pack could not be transferred to or from its store: refused (no such
    bucket, no credentials) or failing after every retry. The message names the file,
    the URL and the error."""


_ACCESS_HINT = (
    "check the URL, that the bucket exists (pack writes into it and does not create it), "
    "and the credentials: the usual configuration of the store (for S3 the AWS "
    "environment variables, profiles or instance role; AWS_ENDPOINT_URL for MinIO, R2 or "
    "Ceph), or storage_options={...} passed to pack and PackedDataset"
)


def _refused(what: str, exc: BaseException) -> ShardDownloadError:
    """The error for a request the store refused: what was asked, its answer, the fix."""
    return ShardDownloadError(f"cannot {what} ({type(exc).__name__}: {exc}); {_ACCESS_HINT}")


def is_url(path: object) -> bool:
    """Whether ``path`` is an fsspec URL (``scheme://...``) rather than a local path."""
    return isinstance(path, str) and re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", path) is not None


def url_text(url: str) -> str:
    """``url`` with its scheme in lower case (``S3://b/x`` is ``s3://b/x``: schemes are
    case-insensitive, and fsspec read ``S3:`` as the bucket's name)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme.lower()}://{rest}"


def refuse_folded_url(path: object, what: str) -> None:
    """Refuse a local path that is a store URL with one slash lost (``s3:/bucket/x.pack``,
    or ``Path("s3://bucket/x.pack")``, which pathlib folds so): it would be written to, or
    read from, a local folder named ``s3:``."""
    if is_url(path) or not isinstance(path, str | os.PathLike):
        return
    text = os.fspath(path)
    found = re.match(r"^([A-Za-z][A-Za-z0-9+.-]+):/+(?=[^/])", str(text))
    if found is None:
        return
    from fsspec.registry import known_implementations

    scheme = found.group(1).lower()
    if scheme in known_implementations:
        fixed = f"{scheme}://{str(text)[found.end() :]}"
        raise ValueError(
            f"{what} {str(text)!r} reads as a URL that lost a slash (a pathlib.Path folds "
            f"'//' into '/'), and would be a local folder named '{found.group(1)}:'. Pass "
            f"the URL as a string: {fixed!r}"
        )


def parse_size(value: float | str | None, what: str = "cache_limit") -> int | None:
    """Bytes from a whole number (``500_000_000``, ``20e9``, a NumPy integer) or a string
    such as ``"500MB"`` or ``"20GiB"`` (None: no limit).

    Raises:
        ValueError: naming what was received and the accepted forms.
    """
    if value is None:
        return None
    if isinstance(value, numbers.Real) and not isinstance(value, bool | str):
        number = float(value)  # 20e9, numpy.int64(500_000_000): whole and positive
        if number > 0 and number.is_integer():
            return int(number)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(value))
    unit = match.group(2).lower() if match else ""
    if isinstance(value, str) and match and unit in _UNITS and float(match.group(1)) > 0:
        return int(float(match.group(1)) * _UNITS[unit])
    raise ValueError(
        f"{what} must be a positive number of bytes or a size such as '500MB' or '20GiB'; "
        f"received {value!r}"
    )


def default_cache_dir() -> Path:
    """``$SCRAMJET_CACHE_DIR``, else ``$XDG_CACHE_HOME/scramjet/packs`` (``~/.cache/...``)."""
    if os.environ.get("SCRAMJET_CACHE_DIR"):
        return Path(os.environ["SCRAMJET_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "scramjet" / "packs"


_FILESYSTEMS: dict[tuple[Any, ...], Any] = {}
_FS_LOCK = threading.Lock()


def _new_fs_lock() -> None:
    """In a forked child: a lock of its own. Making a filesystem holds the lock (about a
    second for S3), and a DataLoader worker forked meanwhile by another reading thread
    would get it held, by a thread it does not have, and wait on it forever."""
    global _FS_LOCK
    _FS_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_new_fs_lock)
# Variables the stores' fsspec backends read credentials, endpoints and settings from.
_ENV_PREFIXES = ("AWS_", "GOOGLE_", "GCLOUD", "GCS", "STORAGE_EMULATOR", "AZURE_", "FSSPEC_")


def _fs_key(protocol: str, options: Mapping[str, Any] | None) -> tuple[int, str, str]:
    """A filesystem's cache key: process, protocol, and a SHA-256 of the options and of the
    credentials environment (every secret in them counts; none is kept in clear)."""
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES))
    text = repr((sorted((options or {}).items()), env))
    return os.getpid(), protocol, hashlib.sha256(text.encode("utf-8")).hexdigest()


def _filesystem(url: str, options: Mapping[str, Any] | None) -> tuple[Any, str]:
    """The fsspec filesystem for ``url`` (one per process, protocol, options and
    credentials environment: making one costs about a second for S3) and the path in it.
    Readers with other credentials (another secret, token or profile) get their own."""
    # The tracking storage layer opens filesystems with timeouts and install hints.
    from scramjet.tracking.storage import StorageTimeouts, open_filesystem, with_default_timeouts

    protocol = url.split("://", 1)[0].lower()
    key = _fs_key(protocol, options)
    with _FS_LOCK:
        fs = _FILESYSTEMS.get(key)
        if fs is None:
            opts = with_default_timeouts(url, _one_try(protocol, options), StorageTimeouts())
            fs, path = open_filesystem(url, opts)
            if protocol in ("s3", "s3a") and isinstance(getattr(fs, "retries", None), int):
                fs.retries = 1  # s3fs's own retry loop (5 tries by default): see _one_try
            _FILESYSTEMS[key] = fs
            return fs, path
    return fs, str(fs._strip_protocol(url)).rstrip("/")


def _one_try(protocol: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``options`` with one botocore attempt per request for S3 (unless the caller set
    ``config_kwargs["retries"]``): :class:`Retry` is the one retry layer. Stacked under
    s3fs's and botocore's own retries, a store that accepts connections but never
    answers cost each attempt 10 read timeouts (a failing download took half an hour)."""
    opts = dict(options or {})
    if protocol in ("s3", "s3a"):
        config = dict(opts.get("config_kwargs") or {})
        config.setdefault("retries", {"max_attempts": 1, "mode": "standard"})
        opts["config_kwargs"] = config
    return opts


# Errors in the request itself (an option the filesystem does not take, a wrong type):
# no retry can mend them.
_MISUSE = (TypeError, AttributeError, NotImplementedError, ImportError)


def _transient(exc: BaseException) -> bool:
    """Whether a retry may help: not a refusal, a missing file or a misused option."""
    from scramjet.tracking.storage import permanent_error

    return (
        permanent_error(exc) is None
        and not isinstance(exc, FileNotFoundError | NotADirectoryError | IsADirectoryError)
        and not isinstance(exc, _MISUSE)
    )


@dataclass
class Retry:
    """How failed downloads are retried: ``attempts`` in all, waits doubling from ``wait``
    up to ``max_wait`` seconds (defaults: 9 attempts over about 45 s)."""

    attempts: int = 9
    wait: float = 0.5
    max_wait: float = 8.0

    def delays(self) -> Iterator[float]:
        """The wait before each attempt (0 before the first)."""
        yield 0.0
        for i in range(self.attempts - 1):
            yield min(self.max_wait, self.wait * 2**i)


def _retried(what: str, retry: Retry, request: Callable[[], _T]) -> _T:
    """``request()``, retried with backoff while the store fails in a way a retry may mend
    (unreachable, timeouts, HTTP 5xx, throttling).

    Raises:
        FileNotFoundError: as the store answered it (the caller knows what it means).
        ShardDownloadError: a refusal (at once), or failures after every attempt; the
            message names ``what`` was asked.
    """
    last: BaseException | None = None
    for delay in retry.delays():
        time.sleep(delay)
        try:
            return request()
        except FileNotFoundError:
            raise
        except Exception as exc:
            if not _transient(exc):
                raise _refused(what, exc) from exc
            logger.info("cannot %s (%r); retrying", what, exc)
            last = exc
    raise ShardDownloadError(
        f"cannot {what} after {retry.attempts} attempts ({type(last).__name__}: {last}); "
        "check that the store is reachable (the endpoint, the network), then run again"
    )


CACHE_WAIT_DEFAULT = 120.0  # seconds a download waits for room in a full cache


def check_cache_wait(cache_wait: Any) -> float:
    """``cache_wait`` as seconds >= 0 (None: the default, 120 s).

    Raises:
        ValueError: a value that is not a finite number of seconds >= 0 (a string, a bool,
            a negative number, NaN, infinity).
    """
    if cache_wait is None:
        return CACHE_WAIT_DEFAULT
    if (
        isinstance(cache_wait, bool)
        or not isinstance(cache_wait, numbers.Real)
        or not math.isfinite(cache_wait)
        or cache_wait < 0
    ):
        raise ValueError(
            f"cache_wait must be a finite number of seconds >= 0 (or None for "
            f"{CACHE_WAIT_DEFAULT:g} s); received {cache_wait!r}. Pass e.g. cache_wait=600 "
            "to let downloads wait longer for readers to free room in a full cache."
        )
    return float(cache_wait)
