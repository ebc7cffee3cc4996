"""Moving experiment files to and from a bucket through :mod:`scramjet.tracking.storage`."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

from scramjet.tracking.storage import (
    RunStorage,
    StorageTimeouts,
    call_with_deadline,
    open_filesystem,
    permanent_error,
)

_SCHEMES = {"s3": "s3", "gs": "gs"}


def bucket_url(scheme: str, bucket_name: str, *parts: str) -> str:
    """``<scheme>://<bucket>/<part>/<part>...`` with empty parts and extra slashes dropped."""
    if scheme not in _SCHEMES:
        raise ValueError(f"scheme must be 's3' or 'gs'; received {scheme!r}.")
    if not bucket_name:
        raise ValueError("bucket_name is empty; pass the name of the bucket to use.")
    inner = "/".join(p.strip("/") for p in parts if p and p.strip("/"))
    return f"{scheme}://{bucket_name}" + (f"/{inner}" if inner else "")


def mirror_files(
    local_dir: str,
    url: str,
    local_paths: Iterable[str],
    storage_options: Mapping[str, Any] | None = None,
) -> list[str]:
    """Upload files of ``local_dir`` to the same relative paths under ``url``; wait for them.

    Returns:
        The remote URL of every file, in order.

    Raises:
        RuntimeError: a file could not be uploaded (the storage layer's message).
    """
    rels = [os.path.relpath(path, local_dir) for path in local_paths]
    store = RunStorage(local_dir, url, storage_options)
    try:
        for rel in rels:
            store.upload(rel)
        store.wait()
        failed = {rel: store.errors[rel] for rel in rels if rel in store.errors}
        if store.fatal or failed:
            raise RuntimeError(
                f"upload to {url} failed: {store.fatal or failed}; check the bucket name and "
                f"the credentials, then save again."
            )
    finally:
        store.close()
    return [f"{url.rstrip('/')}/{rel}" for rel in rels]


def _with_retries(what: str, fn: Any, *args: Any, attempts: int = 4) -> None:
    timeouts = StorageTimeouts()
    delay = 0.5
    for attempt in range(1, attempts + 1):
        try:
            call_with_deadline(fn, *args, timeout=timeouts.call, name=what)
            return
        except Exception as exc:
            refused = permanent_error(exc)
            if refused or attempt == attempts:
                raise RuntimeError(
                    f"{what} failed after {attempt} attempt(s): {refused or type(exc).__name__}: "
                    f"{exc}; check the bucket, the path and the credentials."
                ) from exc
            time.sleep(delay)
            delay *= 2


def put_file(local_path: str, url: str, storage_options: Mapping[str, Any] | None = None) -> None:
    """Upload one local file to ``url`` (any remote name), with retries."""
    fs, remote = open_filesystem(url, storage_options)
    _with_retries(f"upload of {local_path} to {url}", fs.put_file, local_path, remote)


def get_file(url: str, local_path: str, storage_options: Mapping[str, Any] | None = None) -> str:
    """Download ``url`` to ``local_path`` (parent folders created), with retries."""
    folder = os.path.dirname(os.path.abspath(local_path))
    os.makedirs(folder, exist_ok=True)
    fs, remote = open_filesystem(url, storage_options)
    _with_retries(f"download of {url}", fs.get_file, remote, local_path)
    return local_path


def local_files_under(folder: str) -> list[str]:
    """Every file below ``folder``, sorted."""
    found = []
    for root, _dirs, files in os.walk(folder):
        found += [os.path.join(root, name) for name in files]
    return sorted(found)
