"""Retention, legal holds and erasure on every store: ``purge`` deletes what is past its
retention with a receipt per session; a hold makes every delete path refuse, naming it;
a sealed session's content is unreadable once its key is erased, in every copy, while its
chain still verifies."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import re
import signal
import tempfile
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_session import AgentRuntime, ScriptedModel, ScriptedStep, checkpoint_policy, open_store
from agent_session.governance.holds import place_hold, release_hold
from agent_session.governance.labels import set_stored_labels
from agent_session.integrations.langgraph import EventLogSaver
from agent_session.sealing import Keyring
from agent_session.session import SessionErasedError, SessionHeldError, SessionSealError
from agent_session.session.persistence.failpoints import FAILPOINT_ENV
from tests.forkserver import run_cli
from tests.sweeps import sample
from tests.test_cli import cli
from tests.test_integrity import raw
from tests.test_reference_interop import reference_load
from tests.test_settle_crash import store_of

CANARY = "canary-7f3a9c1e-do-not-keep"
PROPERTY_RING = Keyring(tempfile.mkdtemp(prefix="ring-"), bytes(range(32)))
PROPERTY_KID = PROPERTY_RING.new_key("s")


async def write_session(
    store: str, id: str, *, keyring: Keyring | None = None, text: str = CANARY, turns: int = 1
) -> None:
    """A session of ``turns`` real agent turns whose user text and answer hold ``text``."""
    model = ScriptedModel([ScriptedStep(text=[f"echo {text}"])] * turns)
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store, keyring=keyring, integrity=True))
        runtime.install(checkpoint_policy)
        runtime.models.register("demo", model)
        session = await runtime.sessions.open_or_create(id)
        agent = runtime.agent(session, model="demo/m")
        for turn in range(turns):
            await agent.run_turn(f"{text} turn {turn}")


def ids_in(store: str) -> set[str]:
    listed = cli("ls", store, "--json").stdout
    return {json.loads(line)["id"] for line in listed.splitlines() if line.strip()}


def receipts_of(store: str) -> list[dict[str, Any]]:
    from agent_session.governance.receipts import receipts_for
    from agent_session.stores import parse_store

    found = receipts_for(parse_store(store))
    try:
        return found.all()
    finally:
        found.close()


def test_a_hold_refuses_every_delete_path_and_its_release_is_kept(store: str) -> None:
    asyncio.run(write_session(store, "held"))
    asyncio.run(write_session(store, "free"))
    cli("label", store, "held", "user=ana")
    cli("hold", store, "--label", "user=ana", "--reason", "matter 114", "--by", "counsel")
    rm = cli("rm", store, "held", check_rc=2)
    assert "under legal hold" in rm.stderr
    assert "matter 114" in rm.stderr
    assert "counsel" in rm.stderr
    purged = cli("purge", store, "--older-than", "0s", check_rc=2)
    assert "held: " in purged.stdout
    assert "free: purged" in purged.stdout
    target = store + "-moved" if "://" not in store else None
    if target is not None:
        moved = cli("copy", store, target, "held", "--move", check_rc=2)
        assert "held — " in moved.stdout
        assert not os.path.exists(target + "/held")
    with pytest.raises(SessionHeldError, match="matter 114"):
        asyncio.run(_delete(store, "held"))  # (a framework's delete: the service's own)
    assert ids_in(store) == {"held"}
    cli("release", store, "held", "--reason", "matter closed")
    shown = cli("show", store, "held").stdout
    assert re.search(r"legal hold by counsel \(seq (\d+)\): matter 114", shown)
    assert re.search(r"legal hold released by .+ \(seq \d+\): matter closed", shown)
    cli("rm", store, "held")
    assert ids_in(store) == set()


async def _delete(store: str, id: str) -> None:
    backend = open_store(store)
    try:
        await backend.delete(id)
    finally:
        await backend.aclose()


def test_release_names_a_hold_by_its_seq_and_keeps_the_others(tmp_path: Path) -> None:
    store = str(tmp_path)
    asyncio.run(write_session(store, "s"))
    asyncio.run(place_hold(store, "s", "matter A"))
    asyncio.run(place_hold(store, "s", "matter B"))
    with pytest.raises(ValueError, match="a hold needs a reason"):
        asyncio.run(place_hold(store, "s", " "))
    with pytest.raises(ValueError, match="no standing hold at seq 1 "):
        asyncio.run(release_hold(store, "s", "done", seqs=[1]))
    log = orjson.loads(cli("show", store, "s", "--json").stdout.splitlines()[0])
    assert log  # (the session is readable)
    lines = raw(store, "s").splitlines()
    first = next(orjson.loads(line)["seq"] for line in lines if b'"hold/set"' in line)
    released = asyncio.run(release_hold(store, "s", "A closed", seqs=[first]))
    assert [hold.reason for hold in released] == ["matter A"]
    rm = cli("rm", store, "s", check_rc=2)
    assert "matter B" in rm.stderr
    assert "matter A" not in rm.stderr


@pytest.mark.slow  # (every store; make test runs it)
def test_purge_deletes_by_age_and_label_with_a_receipt_each(store: str) -> None:
    for id, tenant in (("a1", "acme"), ("a2", "acme"), ("b1", "beta")):
        asyncio.run(write_session(store, id))
        asyncio.run(set_stored_labels(store, id, {"tenant": tenant}))
    young = cli("purge", store, "--older-than", "1d", "--label", "tenant=acme")
    assert "purged 0 session(s)" in young.stdout
    dry = cli("purge", store, "--older-than", "0s", "--label", "tenant=acme", "--dry-run")
    assert dry.stdout.count("would purge —") == 2
    assert receipts_of(store) == []
    done = cli("purge", store, "--older-than", "0s", "--label", "tenant=acme", "--json")
    actions = {
        json.loads(line)["id"]: json.loads(line)["action"] for line in done.stdout.splitlines()
    }
    assert actions == {"a1": "purged", "a2": "purged"}
    assert ids_in(store) == {"b1"}
    receipts = receipts_of(store)
    assert [(r["id"], r["state"]) for r in receipts] == [
        ("a1", "purging"),
        ("a1", "purged"),
        ("a2", "purging"),
        ("a2", "purged"),
    ]
    for receipt in receipts:
        assert receipt["rule"] == "older-than 0d label tenant=acme"
        assert receipt["removed"]["lines"] > 5
        assert len(receipt["removed"]["sha256"]) == 64
        assert CANARY not in json.dumps(receipt)


@pytest.mark.slow  # (every store; make test runs it)
def test_erasure_makes_every_copy_unreadable_and_the_chain_still_verifies(
    store: str, tmp_path: Path
) -> None:
    ring_dir, master = tmp_path / "ring", tmp_path / "master.key"
    master.write_bytes(os.urandom(32))
    ring = Keyring(ring_dir, master.read_bytes())
    asyncio.run(write_session(store, "p", keyring=ring, turns=2))
    env = {"AGENT_SESSION_KEYRING": str(ring_dir), "AGENT_SESSION_MASTER_KEY_FILE": str(master)}
    copy_to = str(tmp_path / "copy")
    shown = cli("show", store, "p", env=env).stdout
    assert CANARY in shown
    cli("copy", store, copy_to, "p", env=env)
    stored = raw(store, "p")
    assert CANARY.encode() not in stored
    assert b'"sealed":"v1.' in stored
    cold = cli("show", store, "p", check_rc=2)
    assert "is sealed" in cold.stderr
    assert "AGENT_SESSION_KEYRING" in cold.stderr
    erased = cli("erase", store, "p", env=env)
    assert "p: erased — key(s)" in erased.stdout
    for where in (store, copy_to):
        gone = cli("show", where, "p", env=env, check_rc=2)
        assert "was erased" in gone.stderr
        cli("verify", "--integrity", where, "p", env=env)
    assert receipts_of(store)[-1]["state"] == "erased"
    with pytest.raises(SessionErasedError):
        asyncio.run(_load(copy_to, "p", Keyring(ring_dir, master.read_bytes())))
    assert ids_in(copy_to) == {"p"}  # (an erased session is listed, and deleted as any other)
    cli("rm", copy_to, "p")
    assert ids_in(copy_to) == set()


async def _inspected(store: str, id: str, ring: Keyring) -> str:
    backend = open_store(store, keyring=ring)
    try:
        return str([event.data for event in (await backend.inspect(id)).events])
    finally:
        await backend.aclose()


async def _load(store: str, id: str, ring: Keyring) -> None:
    backend = open_store(store, keyring=ring)
    try:
        await backend.load(id)
    finally:
        await backend.aclose()


def test_a_sealed_session_fails_closed_on_a_line_in_clear(tmp_path: Path) -> None:
    ring = Keyring(tmp_path / "ring", os.urandom(32))
    root = tmp_path / "s"
    asyncio.run(write_session(str(root), "p", keyring=ring))
    (path,) = root.rglob("session.jsonl")
    lines = path.read_bytes().splitlines()
    index = next(i for i, line in enumerate(lines) if b'"user/message"' in line)
    event = orjson.loads(lines[index])
    event["data"] = {"content": [{"type": "text", "text": "planted"}], "role": "user"}
    lines[index] = orjson.dumps(event)
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(SessionSealError, match=f"seq {event['seq']} .*stored in clear"):
        asyncio.run(_load(str(root), "p", ring))


KILLS = [
    (kind, point, hit)
    for kind in ("jsonl", "sqlite", "postgres")
    for point in ("purge:after-intent", "purge:after-delete")
    for hit in (1, 2, 3)
]


@pytest.mark.process
@pytest.mark.parametrize(
    ("kind", "point", "hit"),
    sample(KILLS, 0.5, name="purge-kills", key=lambda case: case[0], also=lambda c: c[1]),
)
def test_a_kill_during_a_purge_leaves_each_session_purged_or_intact(
    kind: str, point: str, hit: int, tmp_path: Path
) -> None:
    store = store_of(kind, tmp_path)
    ids = ["s1", "s2", "s3"]
    for id in ids:
        asyncio.run(write_session(store, id))
    before = {id: raw(store, id) for id in ids}
    killed = run_cli("purge", store, "--older-than", "0s", env={FAILPOINT_ENV: f"{point}@{hit}"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = ids_in(store)
    for id in left:  # never half: what is left is the session as it was
        assert raw(store, id) == before[id]
    gone = [id for id in ids if id not in left]
    assert len(gone) == (hit if point == "purge:after-delete" else hit - 1)
    settled = cli("purge", store, "--older-than", "100d").stdout
    assert f"{'purged' if point == 'purge:after-delete' else 'intact'} (an interrupted purge)" in (
        settled
    )
    ends: dict[str, str] = {}
    for receipt in receipts_of(store):
        if receipt["state"] != "purging":
            ends[receipt["id"]] = receipt["state"]
    assert ends == {
        **dict.fromkeys(gone, "purged"),
        **({} if point == "purge:after-delete" else {ids[hit - 1]: "intact"}),
    }
    assert "interrupted" in receipts_of(store)[-1]["note"]


def sealed_env(tmp_path: Path) -> tuple[Keyring, dict[str, str]]:
    ring_dir, master = tmp_path / "ring", tmp_path / "master.key"
    master.write_bytes(os.urandom(32))
    env = {"AGENT_SESSION_KEYRING": str(ring_dir), "AGENT_SESSION_MASTER_KEY_FILE": str(master)}
    return Keyring(ring_dir, master.read_bytes()), env


def test_erasure_refuses_a_hold_a_session_in_clear_and_a_keyring_that_cannot_read(
    tmp_path: Path,
) -> None:
    ring, env = sealed_env(tmp_path)
    store = str(tmp_path / "s")
    asyncio.run(write_session(store, "sealed", keyring=ring))
    asyncio.run(write_session(store, "clear"))
    cli("hold", store, "sealed", "--reason", "matter 7", env=env)
    held = cli("erase", store, "sealed", env=env, check_rc=2)
    assert "under legal hold" in held.stdout
    clear = cli("erase", store, "clear", env=env, check_rc=2)
    assert "is stored in clear" in clear.stdout
    assert CANARY in cli("show", store, "sealed", env=env).stdout  # (nothing was erased)
    no_ring = cli("erase", store, "sealed", check_rc=4)
    assert "AGENT_SESSION_KEYRING" in no_ring.stderr
    no_master = cli(
        "show", store, "sealed", env={**env, "AGENT_SESSION_MASTER_KEY_FILE": ""}, check_rc=2
    )
    assert "no master key" in no_master.stderr
    other = Keyring(tmp_path / "other-ring", os.urandom(32))
    with pytest.raises(SessionSealError, match="which the keyring .* does not hold"):
        asyncio.run(_load(store, "sealed", other))
    short = tmp_path / "short.key"
    short.write_bytes(b"x" * 16)
    bad = cli(
        "show",
        store,
        "sealed",
        env={**env, "AGENT_SESSION_MASTER_KEY_FILE": str(short)},
        check_rc=4,
    )
    assert "32 or more random bytes" in bad.stderr


def test_a_moved_session_leaves_its_source_and_a_sealed_one_moves_sealed(tmp_path: Path) -> None:
    ring, env = sealed_env(tmp_path)
    source, target = str(tmp_path / "a"), f"sqlite:///{tmp_path}/b.db"
    asyncio.run(write_session(source, "m", keyring=ring))
    moved = cli("copy", source, target, "m", "--move", env=env)
    assert "m: moved —" in moved.stdout
    assert ids_in(source) == set()
    assert CANARY.encode() not in raw(target, "m")
    assert CANARY in cli("show", target, "m", env=env).stdout
    plain = asyncio.run(_copy_to_plain(target, str(tmp_path / "c"), ring))
    assert "is sealed: open the target store with the keyring too" in plain


async def _copy_to_plain(source: str, target: str, ring: Keyring) -> str:
    from agent_session.interchange.copying import copy_session
    from agent_session.session import SessionCopyError

    src, dst = open_store(source, keyring=ring), open_store(target)
    try:
        with pytest.raises(SessionCopyError) as refused:
            await copy_session(src, dst, "m")
        return str(refused.value)
    finally:
        await dst.aclose()
        await src.aclose()


@pytest.mark.process
def test_the_reference_loads_a_held_and_released_log(tmp_path: Path) -> None:
    root = tmp_path / "s"
    asyncio.run(write_session(str(root), "h"))
    cli("hold", str(root), "h", "--reason", "matter 9")
    cli("release", str(root), "h", "--reason", "closed")
    loaded = reference_load(root, "h", "none")
    assert "error" not in loaded, loaded
    kinds = [e["type"] for e in loaded["events"]]
    assert kinds.count("hold/set") == 1
    assert kinds.count("hold/released") == 1


@pytest.mark.process
def test_an_archived_sealed_session_is_erased_in_the_archive_too(tmp_path: Path) -> None:
    from tests.s3_server import bucket

    ring, sealing = sealed_env(tmp_path)
    store, name = str(tmp_path / "s"), bucket()
    env = {**os.environ, **sealing}  # (the S3 server's credentials too)
    asyncio.run(write_session(store, "z", keyring=ring))
    cli("archive", store, "--older-than", "0s", "--to", f"s3://{name}/p", env=env)
    assert CANARY in cli("show", store, "z", env=env).stdout  # (read from the archive)
    shown = asyncio.run(_inspected(store, "z", ring))  # (with the keyring given in code)
    assert CANARY in shown
    archived = _archive_bytes(name)
    assert archived
    assert CANARY.encode() not in archived
    cli("erase", store, "z", env=env)
    gone = cli("show", store, "z", env=env, check_rc=2)
    assert "was erased" in gone.stderr


def _archive_bytes(name: str) -> bytes:
    import boto3
    import zstandard

    s3 = boto3.client("s3")
    listed = s3.list_objects_v2(Bucket=name, Prefix="p/").get("Contents", [])
    data = [s3.get_object(Bucket=name, Key=o["Key"])["Body"].read() for o in listed]
    return b"".join(
        zstandard.ZstdDecompressor().decompressobj().decompress(d)
        if d[:4] == b"\x28\xb5\x2f\xfd"
        else d
        for d in data
    )


async def test_a_framework_s_own_delete_obeys_a_hold(tmp_path: Path) -> None:
    from agent_session.integrations.langgraph.records import log_id
    from tests.test_langgraph import config, graph

    store = str(tmp_path / "s")
    with EventLogSaver(store) as saver:
        await graph(saver, 2).ainvoke({"count": 0, "seen": []}, config("t"))
    await place_hold(store, log_id("t"), "matter 5")
    with EventLogSaver(store) as saver:
        with pytest.raises(SessionHeldError, match="matter 5"):
            await saver.adelete_thread("t")
        assert saver.get_tuple(config("t")) is not None  # (nothing was deleted)


def test_a_fork_of_a_sealed_session_is_erased_with_it(tmp_path: Path) -> None:
    ring, env = sealed_env(tmp_path)
    store = str(tmp_path / "s")
    asyncio.run(write_session(store, "p", keyring=ring, turns=2))
    cli("fork", store, "p", "--turn", "1", "--new-id", "p-fork", env=env)
    assert CANARY in cli("show", store, "p-fork", env=env).stdout
    assert CANARY.encode() not in raw(store, "p-fork")
    cli("erase", store, "p", env=env)
    gone = cli("show", store, "p-fork", env=env, check_rc=2)
    assert "was erased" in gone.stderr


def test_listing_and_verify_name_a_sealed_store_read_without_its_keyring(tmp_path: Path) -> None:
    ring, _ = sealed_env(tmp_path)
    store = str(tmp_path / "s")
    asyncio.run(write_session(store, "p", keyring=ring))
    listed = cli("ls", store).stdout
    assert "balanced" in listed
    verified = cli("verify", store, check_rc=None)
    assert "is sealed" in verified.stdout + verified.stderr


@given(
    st.text(max_size=200), st.integers(0, 10**6), st.sampled_from(["user/message", "tool/result"])
)
def test_sealing_round_trips_and_binds_the_event(text: str, seq: int, kind: str) -> None:
    from agent_session.sealing.seal import open_event, seal_event
    from agent_session.session.events.event import build_event
    from agent_session.session.json.lossless import snapshot

    event = build_event(kind, seq, 1, snapshot({"text": text, "n": seq}, "data"))
    sealed = seal_event(PROPERTY_RING, PROPERTY_KID, "s", event)
    assert sealed.data.keys() == {"sealed"}  # (nothing of the data in clear)
    assert seal_event(PROPERTY_RING, PROPERTY_KID, "s", event) == sealed  # deterministic
    assert open_event(PROPERTY_RING, "s", sealed, sealed_session=True) == event
    moved = build_event(kind, seq + 1, 1, sealed.data)
    with pytest.raises(SessionSealError, match="does not open"):
        open_event(PROPERTY_RING, "s", moved, sealed_session=True)
    with pytest.raises(SessionSealError, match="does not open"):
        open_event(PROPERTY_RING, "t", sealed, sealed_session=True)


@pytest.mark.slow  # (every store; make test runs it)
async def test_purge_keeps_a_session_a_live_writer_holds_and_its_receipt_says_so(
    store: str,
) -> None:
    await write_session(store, "busy")
    await write_session(store, "idle")
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store))
        await runtime.sessions.resume("busy")  # a live writer holds it
        done = await asyncio.to_thread(cli, "purge", store, "--older-than", "0s", check_rc=2)
    assert "busy: live —" in done.stdout
    assert "idle: purged —" in done.stdout
    assert ids_in(store) == {"busy"}
    ends = [(r["id"], r["state"]) for r in receipts_of(store) if r["state"] != "purging"]
    assert sorted(ends) == [("busy", "intact"), ("idle", "purged")]


@pytest.mark.process
def test_an_archive_leaves_a_held_session_hot_and_uploads_nothing(tmp_path: Path) -> None:
    import boto3

    from tests.s3_server import bucket

    store, name = str(tmp_path / "s"), bucket()
    asyncio.run(write_session(store, "kept"))
    cli("hold", store, "kept", "--reason", "matter 3")
    env = dict(os.environ)  # (the S3 server's credentials)
    done = cli(
        "archive", store, "--older-than", "0s", "--to", f"s3://{name}/p", env=env, check_rc=2
    )
    assert "kept: held — " in done.stdout
    assert "matter 3" in done.stdout
    assert boto3.client("s3").list_objects_v2(Bucket=name).get("Contents", []) == []
    assert ids_in(store) == {"kept"}


def test_receipts_added_at_once_by_two_purges_all_land(store: str) -> None:
    from agent_session.governance.receipts import receipts_for
    from agent_session.stores import parse_store

    spec = parse_store(store)
    if spec.kind == "sqlite":
        asyncio.run(write_session(store, "s"))  # (a receipt table lives in a store's database)

    def add(who: str) -> None:
        receipts = receipts_for(spec)
        try:
            for n in range(40):
                receipts.add({"receipt": "purge", "id": f"{who}{n}", "state": "purged"})
        finally:
            receipts.close()

    threads = [threading.Thread(target=add, args=(who,)) for who in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [r["id"] for r in receipts_of(store)]
    assert sorted(ids) == sorted(f"{w}{n}" for w in "ab" for n in range(40))
    for who in "ab":  # (each writer's receipts in the order it added them)
        mine = [i for i in ids if i[0] == who]
        assert mine == [f"{who}{n}" for n in range(40)]


def test_each_event_of_a_chained_sealed_session_is_sealed_once(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chain seals an event as it digests it at commit; the checkpoint writes that
    sealed event, on a medium that takes the batch inline or hands it to its I/O."""
    from agent_session.sealing import seal, storage

    sealed: collections.Counter[int] = collections.Counter()

    def counted(ring: Keyring, kid: str, id: str, event: Any) -> Any:
        if event.type not in seal.CLEAR_TYPES:
            sealed[event.seq] += 1
        return seal.seal_event(ring, kid, id, event)

    monkeypatch.setattr(storage, "seal_event", counted)
    asyncio.run(write_session(store, "p", keyring=Keyring(tmp_path / "ring", os.urandom(32))))
    assert len(sealed) > 5
    assert set(sealed.values()) == {1}


def test_a_receipt_added_after_one_a_crash_tore_is_kept(tmp_path: Path) -> None:
    from agent_session.governance.receipts import RECEIPT_FILE, receipts_for
    from agent_session.stores import parse_store

    store = str(tmp_path)
    (tmp_path / RECEIPT_FILE).write_bytes(b'{"receipt":"purge","id":"a"}\n{"receipt":"pu')
    receipts = receipts_for(parse_store(store))
    receipts.add({"receipt": "purge", "id": "b", "state": "purged"})
    assert [r["id"] for r in receipts_of(store)] == ["a", "b"]
