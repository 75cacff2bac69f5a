"""The objects of an archive on S3-compatible storage (``s3://bucket/prefix``), through
``boto3`` (extra ``[s3]``): the five calls the cold tier makes, put, get, delete, list and
the client's own retries, with every failure an ``OSError`` naming the bucket and the
endpoint, never a credential.

The endpoint is the one given, else ``AWS_ENDPOINT_URL`` (an S3-compatible server), else
AWS's; credentials and the region come from where ``boto3`` looks for them (the
environment's ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, a profile, an instance role).
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, urlsplit

from agent_session.session.persistence.redaction import mask_store

__all__ = ["ArchiveUrl", "Objects", "parse_archive"]

_BUCKET: Final = re.compile(r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]")


@dataclass(frozen=True, slots=True)
class ArchiveUrl:
    """Where archived sessions live: a bucket, and a prefix inside it (no slashes at its
    ends; empty for the bucket's root)."""

    bucket: str
    prefix: str

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def key(self, id: str, name: str) -> str:
        """The object key of file ``name`` of session ``id``."""
        part = quote(id, safe="") or "%"
        return f"{self.prefix}/{part}/{name}" if self.prefix else f"{part}/{name}"


def parse_archive(url: str) -> ArchiveUrl:
    """``s3://bucket[/prefix]`` as an :class:`ArchiveUrl`.

    Raises:
        ValueError: Not such a URL, or a bucket name S3 does not allow (saying why).
    """
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"an archive is named s3://bucket/prefix, got {mask_store(url)!r}")
    if "@" in parts.netloc or ":" in parts.netloc:
        raise ValueError(
            "an archive URL names a bucket only: credentials come from the environment "
            "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) and the server from --endpoint-url "
            "or AWS_ENDPOINT_URL"
        )
    if not _BUCKET.fullmatch(parts.netloc):
        raise ValueError(f"{parts.netloc!r} is not a bucket name S3 allows")
    return ArchiveUrl(parts.netloc, parts.path.strip("/"))


class Objects:
    """The archive at ``url`` on the S3-compatible server ``endpoint`` (see the module
    docstring for the defaults)."""

    def __init__(self, url: str, *, endpoint: str | None = None) -> None:
        try:
            import boto3  # type: ignore[import-untyped]
            from botocore.config import Config  # type: ignore[import-untyped]
        except ImportError as e:
            raise ValueError(
                "an s3:// archive needs the s3 extra: pip install "
                f"'agent-session-runtime[s3]' ({e})"
            ) from None
        self.url = parse_archive(url)
        self.endpoint = endpoint or os.environ.get("AWS_ENDPOINT_URL") or None
        if self.endpoint is not None and urlsplit(self.endpoint).password is not None:
            raise ValueError(  # (before the client, whose errors quote the endpoint)
                f"the S3 endpoint {mask_store(self.endpoint)} carries a credential: name the "
                "server only, and give the credentials in the environment"
            )
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5)
        self._s3: Any = boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=region or "us-east-1", config=config
        )

    @property
    def shown(self) -> str:
        """The archive as messages name it (its URL, and the server when not AWS's)."""
        host = urlsplit(self.endpoint).netloc.rpartition("@")[2] if self.endpoint else ""
        return f"{self.url} (on {host})" if host else str(self.url)

    def _failed(self, what: str, e: Exception) -> OSError:
        code = getattr(e, "response", {}).get("Error", {}).get("Code") or type(e).__name__
        number = errno.EACCES if code in ("AccessDenied", "InvalidAccessKeyId") else errno.EIO
        return OSError(number, f"{what} in the archive {self.shown} failed: {code}")

    def put(self, id: str, name: str, data: bytes) -> None:
        """Store ``data`` as file ``name`` of session ``id`` (replacing it)."""
        try:
            self._s3.put_object(Bucket=self.url.bucket, Key=self.url.key(id, name), Body=data)
        except Exception as e:
            raise self._failed(f"writing {name} of session {id!r}", e) from None

    def get(self, id: str, name: str) -> bytes | None:
        """File ``name`` of session ``id``; ``None`` when it is not there."""
        try:
            answer = self._s3.get_object(Bucket=self.url.bucket, Key=self.url.key(id, name))
            return bytes(answer["Body"].read())
        except Exception as e:
            if getattr(e, "response", {}).get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise self._failed(f"reading {name} of session {id!r}", e) from None

    def delete(self, id: str, name: str) -> None:
        """Remove file ``name`` of session ``id`` (nothing when it is not there)."""
        try:
            self._s3.delete_object(Bucket=self.url.bucket, Key=self.url.key(id, name))
        except Exception as e:
            raise self._failed(f"deleting {name} of session {id!r}", e) from None

    def ids(self, name: str) -> Iterator[str]:
        """Every session that has a file ``name`` in the archive."""
        from urllib.parse import unquote

        prefix = f"{self.url.prefix}/" if self.url.prefix else ""
        try:
            pages = self._s3.get_paginator("list_objects_v2").paginate(
                Bucket=self.url.bucket, Prefix=prefix
            )
            for page in pages:
                for item in page.get("Contents", ()):
                    rest = item["Key"][len(prefix) :]
                    part, _, file = rest.partition("/")
                    if file == name:
                        yield unquote(part) if part != "%" else ""
        except Exception as e:
            raise self._failed("listing the sessions", e) from None
