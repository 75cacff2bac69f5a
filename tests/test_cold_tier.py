"""The cold tier on a real S3-compatible server (moto's, on 127.0.0.1), on every store kind:
``archive`` moves stopped sessions there and the store's commands read them as before;
resuming one brings it back; a SIGKILL at every instant of archiving and restoring leaves
the session hot or archived, never lost; the reference loads an archived log as
downloaded; a damaged archive is named; a credential is never printed."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import tempfile
from pathlib import Path
from typing import Any

import boto3
import pytest

from agent_session import AgentRuntime, open_store
from agent_session.session.persistence.failpoints import FAILPOINT_ENV
from tests.forkserver import run_cli, run_module
from tests.s3_server import CREDENTIALS, bucket, s3_environment
from tests.test_cli import cli

pytestmark = pytest.mark.process


def _conversation(store: str, id: str) -> None:
    cli("demo", "--store", store, "--session-id", id)


async def _events(store: str, id: str) -> list[Any]:
    """The session's stored events as the store's readers give them (hot or archived)."""
    backend = open_store(store)
    try:
        return [e.to_json() for e in (await backend.inspect(id)).events]
    finally:
        await backend.aclose()


async def _hot(store: str, id: str) -> bool:
    """Whether the store itself (not its archive) holds the session."""
    backend = open_store(store)
    try:
        return await backend.storage.revision(id) is not None
    finally:
        await backend.aclose()


def _objects(name: str, prefix: str) -> dict[str, bytes]:
    s3 = boto3.client("s3")
    listed = s3.list_objects_v2(Bucket=name, Prefix=prefix).get("Contents", [])
    return {o["Key"]: s3.get_object(Bucket=name, Key=o["Key"])["Body"].read() for o in listed}


async def test_an_archived_session_reads_as_before_and_a_resume_brings_it_back(
    store: str,
) -> None:
    name = bucket()
    _conversation(store, "a1")
    _conversation(store, "a2")
    before = await _events(store, "a1")
    shown = cli("show", store, "a1").stdout
    figures = cli("stats", store, "a1", "--json").stdout
    done = cli("archive", store, "a1", "--older-than", "0s", "--to", f"s3://{name}/p").stdout
    assert "a1: archived — 108 events" in done
    assert not await _hot(store, "a1")
    objects = _objects(name, "p/a1/")
    manifest = json.loads(objects["p/a1/manifest.json"])
    data = objects["p/a1/session.jsonl.zstd"]
    assert manifest["sha256"] == hashlib.sha256(data).hexdigest()
    assert (manifest["events"], manifest["bytes"], manifest["state"]) == (
        108,
        len(data),
        "balanced",
    )
    listed = cli("ls", store, "--json").stdout
    rows = {row["id"]: row for row in map(json.loads, listed.splitlines())}
    assert rows["a1"]["flags"] == ["archived"]
    assert rows["a1"]["backend"] == "s3"
    assert rows["a2"]["flags"] == []
    assert "a1: balanced — 108 events" in cli("verify", store).stdout
    assert cli("show", store, "a1").stdout == shown
    assert cli("stats", store, "a1", "--json").stdout == figures
    assert await _events(store, "a1") == before
    assert "a1 seq 4" in cli("search", store, "task 1").stdout
    page = Path(tempfile.mkdtemp()) / "a1.html"
    assert "wrote" in cli("view", store, "a1", "-o", str(page)).stdout
    assert "task 1" in page.read_text()
    async with AgentRuntime() as runtime:  # writing brings it back
        runtime.install(open_store(store))
        session = await runtime.sessions.resume("a1")
        assert [e.to_json() for e in session.events[:108]] == before
    assert await _hot(store, "a1")
    assert _objects(name, "p/") == {}
    cli("archive", store, "a1", "--older-than", "0s", "--to", f"s3://{name}/p")
    cli("rm", store, "a1")  # both copies go
    assert _objects(name, "p/") == {}
    assert "a1" not in cli("ls", store).stdout


async def test_the_reference_loads_an_archived_log_as_downloaded(tmp_path: Path) -> None:
    from tests.test_reference_interop import reference_load

    name, store = bucket(), str(tmp_path / "store")
    _conversation(store, "a1")
    before = await _events(store, "a1")
    cli("archive", store, "--older-than", "0s", "--to", f"s3://{name}")
    data = _objects(name, "a1/")["a1/session.jsonl.zstd"]
    theirs = tmp_path / "theirs" / "_no-cwd" / "a1"
    theirs.mkdir(parents=True)
    (theirs / "session.jsonl.zstd").write_bytes(data)
    loaded = reference_load(tmp_path / "theirs", "a1", "zstd")
    assert "error" not in loaded, loaded
    assert loaded["events"] == before


@pytest.mark.parametrize(
    "point",
    [
        "archive:after-data",
        "archive:after-manifest",
        "archive:before-drop",
        "restore:before-forget",
    ],
)
async def test_a_kill_at_any_instant_leaves_the_session_hot_or_archived(
    store: str, point: str
) -> None:
    name = bucket()
    url = f"s3://{name}/p"
    _conversation(store, "a1")
    before = await _events(store, "a1")
    env = {**os.environ, FAILPOINT_ENV: point}
    if point.startswith("restore"):
        cli("archive", store, "--older-than", "0s", "--to", url)
        killed = run_module("tests.archive_child", store, url, "resume", "a1", env=env)
    else:
        killed = run_module("tests.archive_child", store, url, "archive", env=env)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    hot, archived = await _hot(store, "a1"), "p/a1/manifest.json" in _objects(name, "p/")
    assert hot  # every kill point is before the drop (a restore's: after it is back)
    assert archived == (point != "archive:after-data")  # (a log without a manifest is none)
    assert await _events(store, "a1") == before  # the hot copy, whole
    if point.startswith("restore"):  # (the hot copy is the session; the leftover is replaced)
        resumed = run_module("tests.archive_child", store, url, "resume", "a1")
        assert resumed.returncode == 0, resumed.stderr
    again = cli("archive", store, "--older-than", "0s", "--to", url).stdout
    assert "a1: archived" in again  # the next archiving checks, then drops the hot copy
    assert not await _hot(store, "a1")
    assert (await _events(store, "a1"))[:108] == before  # (+ the resume's end-seed)
    assert "1 balanced" in cli("verify", store).stdout


async def test_recent_and_live_sessions_stay_hot(tmp_path: Path) -> None:
    name, store = bucket(), str(tmp_path / "store")
    _conversation(store, "old")
    done = cli("archive", store, "--older-than", "1d", "--to", f"s3://{name}").stdout
    assert "old: kept — written to within the age given" in done
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store))
        await runtime.sessions.resume("old")  # a live writer holds it
        done = cli("archive", store, "--older-than", "0s", "--to", f"s3://{name}").stdout
        assert "old: kept — a live writer holds it" in done
    assert await _hot(store, "old")
    refused = run_cli("archive", store, "--older-than", "0s", "--to", f"s3://{name}-other")
    assert refused.returncode == 4
    assert f"this store archives to s3://{name}" in refused.stderr


async def test_a_damaged_archive_is_named_and_a_credential_is_never_printed(
    tmp_path: Path,
) -> None:
    name, store = bucket(), str(tmp_path / "store")
    _conversation(store, "a1")
    cli("archive", store, "--older-than", "0s", "--to", f"s3://{name}")
    boto3.client("s3").put_object(Bucket=name, Key="a1/session.jsonl.zstd", Body=b"x" * 11)
    shown = run_cli("show", store, "a1")
    assert shown.returncode == 2
    assert "its session.jsonl.zstd is missing or cut short" in shown.stderr
    boto3.client("s3").put_object(Bucket=name, Key="a1/manifest.json", Body=b"{not json")
    listed = run_cli("ls", store)
    assert listed.returncode == 2
    assert "not an archive manifest" in listed.stdout
    _conversation(store, "a2")
    gone = {**os.environ, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    failed = run_cli("archive", store, "--older-than", "0s", "--to", f"s3://{name}", env=gone)
    assert failed.returncode == 2
    assert "a2: refused" in failed.stdout
    assert "in the archive s3://" in failed.stdout
    for output in (shown, failed):
        assert CREDENTIALS["AWS_SECRET_ACCESS_KEY"] not in output.stdout + output.stderr
    with_key = run_cli("archive", store, "--older-than", "0s", "--to", "s3://key:secret@b")
    assert with_key.returncode == 4
    assert "secret" not in with_key.stderr.replace("AWS_SECRET_ACCESS_KEY", "")


def test_a_store_without_an_archive_reads_as_before(tmp_path: Path) -> None:
    s3_environment()
    store = tmp_path / "store"
    _conversation(str(store), "a1")
    assert not (store / ".agent-session-archive.json").exists()
    missing = run_cli("show", str(store), "nope")
    assert missing.returncode == 3


def test_a_manifest_of_another_session_or_format_is_refused() -> None:
    from agent_session.cold.archive import Manifest
    from agent_session.session import SessionPersistenceCorruptionError

    kept = Manifest("a", {"id": "a"}, 1, 10, "00", "balanced", 1, 2)
    assert Manifest.decode(kept.encode(), "a", "here") == kept
    with pytest.raises(
        SessionPersistenceCorruptionError, match="here: the manifest of session 'a', not 'b'"
    ):
        Manifest.decode(kept.encode(), "b", "here")
    other = json.loads(kept.encode())
    other["format"] = "agent-session-archive/9"
    with pytest.raises(SessionPersistenceCorruptionError, match="not an archive manifest"):
        Manifest.decode(json.dumps(other).encode(), "a", "here")
    with pytest.raises(SessionPersistenceCorruptionError, match="not an archive manifest"):
        Manifest.decode(b"[1, 2]", "a", "here")
