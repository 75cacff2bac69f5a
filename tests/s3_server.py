"""An S3-compatible server on 127.0.0.1 for the tests: moto's own server (its real HTTP
server, on a thread of the test process, on a free port), started on first use and shared by
the tests of the process; each test gets a bucket of its own. Without ``moto[server]`` (the
test extra) the tests that need it fail, never skip."""

from __future__ import annotations

import os
import uuid
from typing import Any

__all__ = ["CREDENTIALS", "bucket", "endpoint", "s3_environment"]

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "test-access-key",
    "AWS_SECRET_ACCESS_KEY": "test-secret-5f1d9c",
    "AWS_REGION": "us-east-1",
}
"""What the archive's client signs with (the server accepts any)."""
_server: Any = None


def endpoint() -> str:
    """The server's URL (started on first call)."""
    global _server
    if _server is None:
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()  # (returns once it listens)
        _server = server
    host, port = _server.get_host_and_port()
    return f"http://{host}:{port}"


def s3_environment() -> dict[str, str]:
    """The environment a process reaches the server with (and put into this one's)."""
    env = {**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint()}
    os.environ.update(env)
    return env


def bucket() -> str:
    """A new empty bucket's name."""
    import boto3

    s3_environment()
    name = f"t-{uuid.uuid4().hex[:20]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return name
