"""A real S3-compatible server (moto's threaded server) on 127.0.0.1 for storage tests."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class S3Server:
    """Start, stop and restart moto on one port; bucket contents survive a restart
    (moto keeps them in this process), as a real store keeps them across an outage."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._server = None

    def start(self) -> None:
        from moto.server import ThreadedMotoServer

        for _ in range(50):
            try:
                self._server = ThreadedMotoServer(
                    ip_address="127.0.0.1", port=self.port, verbose=False
                )
                self._server.start()
                return
            except OSError:  # the port may still be in TIME_WAIT right after a stop
                time.sleep(0.1)
        raise RuntimeError("could not restart the S3 server")

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def new_bucket(self) -> str:
        name = f"bucket-{uuid.uuid4().hex[:10]}"
        self.client().create_bucket(Bucket=name)
        return name

    def list_keys(self, bucket: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for item in page.get("Contents", []):
                out[item["Key"]] = int(item["Size"])
        return out


@pytest.fixture(scope="module")
def s3_server() -> Iterator[S3Server]:
    server = S3Server()
    server.start()
    yield server
    server.stop()


@pytest.fixture()
def s3(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The server, with AWS_ENDPOINT_URL and dummy credentials set in the environment."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return s3_server
