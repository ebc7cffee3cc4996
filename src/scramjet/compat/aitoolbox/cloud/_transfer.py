"""Moving experiment files to and from a bucket.

``s3://`` transfers use a boto3 client when boto3 is installed, as AIToolbox does, so
code (and tests) that point boto3 somewhere else, or stub it in-process, see every
transfer. The client reads the usual AWS settings (``AWS_ENDPOINT_URL``, profiles,
credentials) and has bounded connect/read timeouts and retries. Without boto3, for
``gs://``, or with ``storage_options`` only s3fs understands, transfers go through
:mod:`scramjet.tracking.storage` (fsspec). A failed upload raises and never touches the
local file.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from scramjet.tracking.storage import (
    RunStorage,
    StorageCheckError,
    StorageTimeouts,
    call_with_deadline,
    open_filesystem,
    permanent_error,
)

_SCHEMES = {"s3": "s3", "gs": "gs"}
#: fsspec/s3fs storage options with a boto3 equivalent (others keep the fsspec path).
_S3FS_TO_BOTO3 = {
    "key": "aws_access_key_id",
    "secret": "aws_secret_access_key",
    "token": "aws_session_token",
    "endpoint_url": "endpoint_url",
}
_CLIENT_KWARGS = {
    "endpoint_url",
    "region_name",
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "verify",
    "use_ssl",
}
_IGNORED = {"skip_instance_cache", "use_listings_cache"}


def s3_client(url: str, storage_options: Mapping[str, Any] | None = None) -> Any | None:
    """A boto3 S3 client for an ``s3://`` URL; None when the fsspec path is to be used.

    None for other schemes, when boto3 is not installed, or when ``storage_options``
    holds settings with no boto3 equivalent (``key``/``secret``/``token``/``endpoint_url``,
    ``profile`` and ``client_kwargs`` have one).
    """
    if not url.startswith("s3://"):
        return None
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        return None
    options = {k: v for k, v in (storage_options or {}).items() if k not in _IGNORED}
    client_kwargs = dict(options.pop("client_kwargs", None) or {})
    profile = options.pop("profile", None)
    if set(options) - set(_S3FS_TO_BOTO3) or set(client_kwargs) - _CLIENT_KWARGS:
        return None
    for name, value in options.items():
        if value is not None:
            client_kwargs[_S3FS_TO_BOTO3[name]] = value
    timeouts = StorageTimeouts()
    config = Config(
        connect_timeout=timeouts.connect,
        read_timeout=timeouts.read,
        retries={"max_attempts": 3, "mode": "standard"},
    )
    session = boto3.session.Session(profile_name=profile)
    return session.client("s3", config=config, **client_kwargs)


def split_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` → ``("bucket", "a/b")``."""
    bucket, _, key = url[len("s3://") :].partition("/")
    return bucket, key.strip("/")


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
    client = s3_client(url, storage_options)
    if client is not None:
        for rel in rels:
            _put(client, os.path.join(local_dir, rel), f"{url.rstrip('/')}/{rel}")
        return [f"{url.rstrip('/')}/{rel}" for rel in rels]
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


def _with_retries(
    what: str, fn: Any, *args: Any, attempts: int = 4, size: int = 0, **kwargs: Any
) -> None:
    """``fn(*args, **kwargs)`` under a deadline (longer for ``size`` bytes), retried with backoff."""
    timeouts = StorageTimeouts()
    deadline = timeouts.call + size / timeouts.min_rate
    delay = 0.5
    for attempt in range(1, attempts + 1):
        try:
            call_with_deadline(lambda: fn(*args, **kwargs), timeout=deadline, name=what)
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


def _in_this_thread() -> Any:
    """boto3's transfer settings without its thread pool: the transfer runs in the daemon
    thread of :func:`call_with_deadline`. With the pool, an attempt abandoned at its
    deadline (an endpoint that never answers) left the pool's threads waiting on their
    sockets, and Python joins them at exit: a script that saved during an outage took
    about 50 s more to end, silently."""
    from boto3.s3.transfer import TransferConfig

    return TransferConfig(use_threads=False)


def _put(client: Any, local_path: str, url: str) -> None:
    """Upload with a boto3 client (multipart for large files), with retries."""
    bucket, key = split_s3_url(url)
    size = os.path.getsize(local_path)
    what = f"upload of {local_path} to {url}"
    config = _in_this_thread()
    _with_retries(what, client.upload_file, local_path, bucket, key, size=size, Config=config)


def put_file(local_path: str, url: str, storage_options: Mapping[str, Any] | None = None) -> None:
    """Upload one local file to ``url`` (any remote name), with retries."""
    client = s3_client(url, storage_options)
    if client is not None:
        _put(client, local_path, url)
        return
    fs, remote = open_filesystem(url, storage_options)
    size = os.path.getsize(local_path)
    _with_retries(f"upload of {local_path} to {url}", fs.put_file, local_path, remote, size=size)


def get_file(url: str, local_path: str, storage_options: Mapping[str, Any] | None = None) -> str:
    """Download ``url`` to ``local_path`` (parent folders created), with retries."""
    folder = os.path.dirname(os.path.abspath(local_path))
    os.makedirs(folder, exist_ok=True)
    client = s3_client(url, storage_options)
    if client is not None:
        bucket, key = split_s3_url(url)
        _with_retries(
            f"download of {url}", client.download_file, bucket, key, local_path,
            Config=_in_this_thread(),
        )  # fmt: skip
        return local_path
    fs, remote = open_filesystem(url, storage_options)
    _with_retries(f"download of {url}", fs.get_file, remote, local_path)
    return local_path


def check_writable(
    local_dir: str, url: str, storage_options: Mapping[str, Any] | None = None
) -> None:
    """Write and delete a probe object under ``url``.

    Raises:
        StorageCheckError: the destination cannot be written (the storage's answer).
    """
    client = s3_client(url, storage_options)
    if client is None:
        RunStorage(local_dir, url, storage_options, check=True).close()
        return
    bucket, prefix = split_s3_url(url)
    key = "/".join(p for p in (prefix, f".scramjet-probe-{uuid.uuid4().hex}") if p)
    timeout = StorageTimeouts().check
    try:
        call_with_deadline(
            lambda: client.put_object(Bucket=bucket, Key=key, Body=b""),
            timeout=timeout,
            name="probe write",
        )
        call_with_deadline(
            lambda: client.delete_object(Bucket=bucket, Key=key),
            timeout=timeout,
            name="probe delete",
        )
    except Exception as exc:
        reason = permanent_error(exc) or f"{type(exc).__name__}: {exc}"
        raise StorageCheckError(
            f"cannot write to {url} ({reason}); check the bucket name, the credentials and "
            f"AWS_ENDPOINT_URL."
        ) from exc


def local_files_under(folder: str) -> list[str]:
    """Every file below ``folder``, sorted."""
    found = []
    for root, _dirs, files in os.walk(folder):
        found += [os.path.join(root, name) for name in files]
    return sorted(found)
