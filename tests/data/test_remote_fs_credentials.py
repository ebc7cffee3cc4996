"""Readers of one process with other credentials get their own filesystem, never another's.

moto's S3 server on 127.0.0.1 runs with its IAM check on (``/moto-api/reset-auth``): a
request signed with an unknown key or a wrong secret is refused, as a real store does.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packdata_helpers import write_csv, write_images
from tests.tracking.s3_helpers import S3Server

from scramjet.data import PackedDataset, _remote, pack
from scramjet.data._remote import ShardDownloadError

_ALL_S3 = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
}


@dataclass
class AuthS3:
    endpoint: str
    url: str
    key_id: str
    secret: str


def _set_auth(endpoint: str, free_requests: str) -> str:
    """Turn moto's credential check on ("0") or off ("inf"); returns the previous count."""
    request = urllib.request.Request(
        f"{endpoint}/moto-api/reset-auth",
        data=free_requests.encode(),
        method="POST",
        headers={"Content-Type": "text/plain"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return str(json.loads(answer.read())["PREVIOUS_INITIAL_NO_AUTH_ACTION_COUNT"])


@pytest.fixture(scope="module")
def auth_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthS3]:
    """A pack in a bucket that only one IAM user's key pair may read."""
    server = S3Server()
    server.start()
    import boto3

    iam = boto3.client(
        "iam", endpoint_url=server.endpoint, region_name="us-east-1",
        aws_access_key_id="setup", aws_secret_access_key="setup",
    )  # fmt: skip
    iam.create_user(UserName="reader")
    iam.put_user_policy(UserName="reader", PolicyName="s3", PolicyDocument=json.dumps(_ALL_S3))
    key = iam.create_access_key(UserName="reader")["AccessKey"]
    root = tmp_path_factory.mktemp("creds") / "imgs"
    names = write_images(root, 4)
    rows = [[n, str(i)] for i, (n, _) in enumerate(names)]
    write_csv(root / "list.csv", ["image", "label"], rows)
    url = f"s3://{server.new_bucket()}/p.pack"
    options = {"endpoint_url": server.endpoint, "key": "setup", "secret": "setup"}
    pack(root, root / "list.csv", url, dtype=["int64"], height=32, width=32, encode="raw",
         shards=1, workers=0, progress=False, storage_options=options)  # fmt: skip
    previous = _set_auth(server.endpoint, "0")
    try:
        yield AuthS3(server.endpoint, url, key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        _set_auth(server.endpoint, previous)  # moto's setting is shared by the process
        server.stop()


@pytest.fixture
def env(auth_s3: AuthS3, monkeypatch: pytest.MonkeyPatch) -> AuthS3:
    monkeypatch.setenv("AWS_ENDPOINT_URL", auth_s3.endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", auth_s3.key_id)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    return auth_s3


def _read(url: str, cache: Path, **options: str) -> int:
    ds = PackedDataset(url, cache_dir=cache, storage_options=options or None)
    return int(ds[3]["label"])


def test_a_wrong_secret_in_the_environment_is_refused_after_a_good_one(
    env: AuthS3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", env.secret)
    assert _read(env.url, tmp_path / "a") == 3
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")  # same key id
    with pytest.raises(ShardDownloadError, match=r"cannot read .*Forbidden"):
        _read(env.url, tmp_path / "b")


def test_a_good_secret_in_the_environment_reads_after_a_wrong_one(
    env: AuthS3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "a-mistyped-secret")
    with pytest.raises(ShardDownloadError):
        _read(env.url, tmp_path / "a")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", env.secret)  # the fix the error asks for
    assert _read(env.url, tmp_path / "b") == 3


def test_storage_options_key_pairs_each_get_their_own_filesystem(
    auth_s3: AuthS3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    good = {"endpoint_url": auth_s3.endpoint, "key": auth_s3.key_id, "secret": auth_s3.secret}
    wrong = good | {"secret": "another-secret-value"}
    assert _read(auth_s3.url, tmp_path / "a", **good) == 3
    with pytest.raises(ShardDownloadError):
        _read(auth_s3.url, tmp_path / "b", **wrong)
    assert _read(auth_s3.url, tmp_path / "c", **good) == 3
    # The cache's keys hold a digest of the credentials, never a secret itself.
    keys = repr(list(_remote._FILESYSTEMS))
    assert auth_s3.secret not in keys and "another-secret-value" not in keys
