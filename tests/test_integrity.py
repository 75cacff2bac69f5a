"""The tamper-evident log: a store opened with ``integrity=True`` chains each log's stored
lines and anchors them at checkpoints. ``verify --integrity`` names the first seq whose bytes
changed (a flipped byte anywhere, a removed line) on every store, never raises a false alarm
over SIGKILLs at any instant, and, with signatures made by a key the writer does not hold,
catches an attacker who rewrote the chain. The audit export checks by itself, redacted or
not. The chain is checked here against this file's own implementation of its definition."""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_session import new_key, open_store, sign_anchors
from agent_session.audit import check_signatures, read_signatures, verify_export
from agent_session.session.chain import Chain, check_chain, stored_units
from tests.forkserver import run_module
from tests.sweeps import examples, sample, seed
from tests.test_cli import cli
from tests.test_reference_interop import reference_load
from tests.test_settle_crash import store_of

KINDS = ["jsonl", "sqlite", "postgres"]


def write(store: str, *args: str) -> None:
    done = run_module("tests.chain_child", store, *args)
    assert done.returncode in (0, -9), done.stderr


def raw(store: str, id: str = "job") -> bytes:
    async def read() -> bytes:
        backend = open_store(store)
        try:
            artifact = await backend.read_raw(id)
            assert artifact is not None
            return artifact.content
        finally:
            await backend.aclose()

    return asyncio.run(read())


def stored(store: str, id: str = "job") -> bool:
    async def look() -> bool:
        backend = open_store(store)
        try:
            return await backend.read_raw(id) is not None
        finally:
            await backend.aclose()

    return asyncio.run(look())


def check(store: str, id: str = "job") -> Any:
    head, units = stored_units(raw(store, id))
    return check_chain(id, head, units)


def own_anchors(content: bytes) -> dict[int, str]:
    """This test's reading of the definition: each anchor's hash, from the lines it covers
    (``SHA-256(previous anchor's hash ‖ digest of each covered line)``), by anchor seq."""
    previous = hashlib.sha256(b"agent-session chain v1").digest()
    digests: dict[int, bytes] = {}
    out = {}
    for line in content.split(b"\n")[1:]:
        if not line:
            continue
        event = orjson.loads(line)
        if event["type"] == "audit/anchor":
            data = event["data"]
            covered = b"".join(digests[s] for s in range(data["from"], data["through"] + 1))
            previous = hashlib.sha256(previous + covered).digest()
            out[event["seq"]] = previous.hex()
        digests[event["seq"]] = hashlib.sha256(line).digest()
    return out


@pytest.mark.process
@pytest.mark.parametrize("kind", KINDS)
def test_a_chained_log_verifies_on_every_store_and_its_anchors_are_the_definition_s(
    kind: str, tmp_path: Path
) -> None:
    store = store_of(kind, tmp_path)
    write(store, "--turns", "2")
    write(store, "--turns", "2", "--fork")  # resumed, then forked
    for id in ("job", "job-fork"):
        report = check(store, id)
        assert report.ok, report.problem
        assert report.uncovered == 0
        assert len(report.anchors) >= 4  # (one per turn end, and every 64 lines)
        content = raw(store, id)
        hashes = own_anchors(content)
        for line in content.splitlines()[1:]:
            event = orjson.loads(line)
            if event["type"] == "audit/anchor":
                assert event["ignorable"] is True
                assert event["data"]["hash"] == hashes[event["seq"]]
                assert (
                    len(event["data"]["lines"])
                    == event["data"]["through"] + 1 - event["data"]["from"]
                )
    shown = cli("verify", "--integrity", store)
    assert "job: chain intact" in shown.stdout
    assert "checked 2 log(s): 2 intact" in shown.stdout
    if kind == "jsonl":  # the reference loads a chained log with the same events
        theirs = reference_load(Path(store), "job", "none")
        assert "error" not in theirs, theirs
        ours = [orjson.loads(line) for line in raw(store).splitlines()[1:]]
        assert theirs["events"] == ours


def corrupt(kind: str, store: str, seq: int, mutate: Any) -> None:
    """Apply ``mutate`` (bytes -> bytes) to the stored form of ``seq`` (None: delete it)."""
    if kind == "jsonl":
        path = next(Path(store).rglob("session.jsonl"))
        lines = path.read_bytes().split(b"\n")
        changed = mutate(lines[seq + 1])
        if changed is None:
            del lines[seq + 1]
        else:
            lines[seq + 1] = changed
        path.write_bytes(b"\n".join(lines))
    elif kind == "sqlite":
        with sqlite3.connect(store.removeprefix("sqlite:///")) as db:
            (data,) = db.execute("SELECT data FROM events WHERE seq = ?", (seq,)).fetchone()
            changed = mutate(data.encode())
            if changed is None:
                db.execute("DELETE FROM events WHERE seq = ?", (seq,))
            else:
                text = changed.decode("utf-8", "replace")
                db.execute("UPDATE events SET data = ? WHERE seq = ?", (text, seq))
    else:
        with psycopg.connect(store, autocommit=True) as db:
            row = db.execute(
                "SELECT line FROM agent_session_event WHERE seq = %s AND session_id = 'job'",
                (seq,),
            ).fetchone()
            assert row is not None
            changed = mutate(row[0].encode())
            if changed is None:
                db.execute("DELETE FROM agent_session_event WHERE seq = %s", (seq,))
            else:
                text = changed.decode("utf-8", "replace").replace("\0", "?")
                db.execute("UPDATE agent_session_event SET line = %s WHERE seq = %s", (text, seq))


def flip(offset: int) -> Any:
    def mutate(line: bytes) -> bytes:
        at = offset % len(line)
        changed = bytes([line[at] ^ 0x01]) if line[at] not in b'\n"' else b"'"
        return line[:at] + changed + line[at + 1 :]

    return mutate


@pytest.mark.process
@pytest.mark.parametrize("kind", KINDS)
def test_one_flipped_byte_anywhere_is_named_by_its_seq(kind: str, tmp_path: Path) -> None:
    rng = random.Random(seed())
    cases = sample(list(range(60)), 0.25, name=f"flip-{kind}")
    for case in cases:
        store = store_of(kind, tmp_path / f"c{case}")
        write(store, "--turns", "2")
        last = check(store).events - 1
        target = rng.randrange(0, last)  # (the last line is the final anchor's own)
        corrupt(kind, store, target, flip(rng.randrange(1 << 16)))
        report = check(store)
        assert not report.ok, (case, target)
        assert report.bad_seq == target, (target, report.problem)
        shown = cli("verify", "--integrity", store, check_rc=2)
        assert "job: chain broken:" in shown.stdout


@pytest.mark.process
@pytest.mark.parametrize("kind", KINDS)
def test_a_removed_middle_line_is_named(kind: str, tmp_path: Path) -> None:
    store = store_of(kind, tmp_path)
    write(store, "--turns", "2")
    corrupt(kind, store, 17, lambda line: None)
    report = check(store)
    assert report.bad_seq == 17
    assert "seq 17 missing" in (report.problem or "")


@pytest.mark.process
@pytest.mark.parametrize("kind", KINDS)
def test_an_attacker_who_rechains_without_the_key_fails_the_signature_check(
    kind: str, tmp_path: Path
) -> None:
    store = store_of(kind, tmp_path)
    write(store, "--turns", "2")
    key, public = new_key(tmp_path / "keys" / "anchors.key")
    signed = cli("sign", store, "--key", str(key), "--to", str(tmp_path / "sigs"))
    assert "signed" in signed.stdout
    before = check(store)
    assert (
        check_signatures(before, public, read_signatures(tmp_path / "sigs", "job")).problem is None
    )

    # the attacker edits a tool result and re-chains every anchor after it, correctly
    content = raw(store)
    lines = content.split(b"\n")
    target = next(i for i, line in enumerate(lines) if b'"tool/result"' in line)
    forged = lines[target].replace(b"seen 0", b"seen 9")
    assert forged != lines[target]
    lines[target] = forged
    previous = hashlib.sha256(b"agent-session chain v1").digest()
    digests: dict[int, bytes] = {}
    for index in range(1, len(lines)):
        if not lines[index]:
            continue
        event = orjson.loads(lines[index])
        if event["type"] == "audit/anchor":
            data = event["data"]
            covered = [digests[s] for s in range(data["from"], data["through"] + 1)]
            previous = hashlib.sha256(previous + b"".join(covered)).digest()
            data["hash"] = previous.hex()
            data["lines"] = [digest[:8].hex() for digest in covered]
            lines[index] = orjson.dumps(event)
            rewrite(kind, store, event)
        digests[event["seq"]] = hashlib.sha256(lines[index]).digest()
    rewrite(kind, store, orjson.loads(forged))
    after = check(store)
    assert after.ok, after.problem  # a consistent re-chain: the chain alone cannot tell
    caught = check_signatures(after, public, read_signatures(tmp_path / "sigs", "job"))
    assert caught.problem is not None
    assert "records hash" in caught.problem
    shown = cli(
        "verify",
        "--integrity",
        store,
        "--public-key",
        str(public),
        "--signatures",
        str(tmp_path / "sigs"),
        check_rc=2,
    )
    assert "signature check failed" in shown.stdout


def rewrite(kind: str, store: str, event: dict[str, Any]) -> None:
    """Store ``event`` (its line) in place of the stored one of its seq."""
    seq = event["seq"]
    if kind == "jsonl":
        path = next(Path(store).rglob("session.jsonl"))
        lines = path.read_bytes().split(b"\n")
        lines[seq + 1] = orjson.dumps(event)
        path.write_bytes(b"\n".join(lines))
    elif kind == "sqlite":
        with sqlite3.connect(store.removeprefix("sqlite:///")) as db:
            data = orjson.dumps(event["data"]).decode()
            db.execute("UPDATE events SET data = ? WHERE seq = ?", (data, seq))
    else:
        with psycopg.connect(store, autocommit=True) as db:
            line = orjson.dumps(event).decode()
            db.execute("UPDATE agent_session_event SET line = %s WHERE seq = %s", (line, seq))


@pytest.mark.process
def test_the_audit_export_checks_by_itself_redacted_or_not(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    write(store, "--turns", "2")
    key, public = new_key(tmp_path / "k" / "anchors.key")
    sign_anchors(check(store), key, tmp_path / "sigs")
    whole = cli("export", store, "job", "--format", "audit", "--signatures", str(tmp_path / "sigs"))
    redacted = cli(
        "export",
        store,
        "job",
        "--format",
        "audit",
        "--redact",
        "content",
        "--signatures",
        str(tmp_path / "sigs"),
    )
    assert "seen 1" in whole.stdout
    assert "seen 1" not in redacted.stdout  # no content but the anchors'
    for name, text in (("whole", whole.stdout), ("redacted", redacted.stdout)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text(text)
        report, signatures = verify_export(path)
        assert report.ok, report.problem
        assert check_signatures(report, public, signatures).problem is None
        shown = cli("verify", "--integrity", str(path), "--public-key", str(public))
        assert "chain intact" in shown.stdout
        assert "anchor(s) signed" in shown.stdout
    # a line changed in the export is named by its seq
    entries = [json.loads(line) for line in whole.stdout.splitlines()]
    victim = next(e for e in entries[1:] if e.get("type") == "tool/result")
    victim["line"] = victim["line"].replace("seen ", "SEEN ")
    assert "SEEN" in victim["line"]
    altered = tmp_path / "altered.jsonl"
    altered.write_text("".join(json.dumps(e) + "\n" for e in entries))
    report, _ = verify_export(altered)
    assert report.bad_seq == victim["seq"]
    cli("verify", "--integrity", str(altered), check_rc=2)


@pytest.mark.process
@pytest.mark.parametrize("kind", KINDS)
def test_sigkills_at_any_instant_never_raise_a_false_alarm(kind: str, tmp_path: Path) -> None:
    store = store_of(kind, tmp_path)
    rng = random.Random(seed() + KINDS.index(kind))
    reached = 0
    for round in range(8):
        reached += rng.randrange(3, 40)
        write(store, "--die-at", str(reached), "--turns", "2")
        if round == 0 and not stored(store):
            continue  # (killed before its first checkpoint: nothing was stored)
        report = check(store)
        assert report.ok, (round, reached, report.problem)
    write(store, "--turns", "1")
    final = check(store)
    assert final.ok, final.problem
    assert final.uncovered == 0
    assert cli("verify", store).returncode == 0  # and the log itself is balanced


def lines_strategy() -> Any:
    text = st.text(alphabet=st.characters(blacklist_characters="\n\r", codec="utf-8"), max_size=40)
    return st.lists(text, min_size=1, max_size=30)


@settings(max_examples=examples(200), deadline=None)
@given(texts=lines_strategy(), anchors=st.lists(st.integers(0, 29), max_size=6), data=st.data())
def test_any_changed_byte_of_an_anchored_line_is_named(
    texts: list[str], anchors: list[int], data: Any
) -> None:
    """The writer's chain (anchors after random lines) always checks; one changed byte of a
    line an anchor covers is named by that line's seq."""
    chain, lines, seq = Chain(), [], 0
    header = b'{"type":"session","id":"p"}'
    from agent_session.session.chain import header_digest

    def add(event: dict[str, Any]) -> None:
        nonlocal seq
        line = orjson.dumps({"type": event["type"], "seq": seq, "time": 0, "data": event["data"]})
        chain.add(seq, 1, line, event["data"] if event["type"] == "audit/anchor" else None)
        lines.append(line)
        seq += 1

    for index, text in enumerate(texts):
        add({"type": "user/message", "data": {"t": text}})
        if index in anchors or index == len(texts) - 1:
            while chain.unanchored:
                add({"type": "audit/anchor", "data": chain.take_anchor(header_digest(header))})
    content = b"\n".join([header, *lines]) + b"\n"
    head, units = stored_units(content)
    assert check_chain("p", head, units).ok
    target = data.draw(st.integers(0, len(lines) - 2))  # (not the final anchor's own line)
    at = data.draw(st.integers(0, len(lines[target]) - 1))
    changed = bytearray(lines[target])
    changed[at] = changed[at] ^ data.draw(st.sampled_from([0x01, 0x02, 0x20, 0x40]))
    if b"\n" in changed:
        return
    mutated = [*lines]
    mutated[target] = bytes(changed)
    head, units = stored_units(b"\n".join([header, *mutated]) + b"\n")
    report = check_chain("p", head, units)
    assert not report.ok
    assert report.bad_seq == target, report.problem


FAILPOINTS = {
    "jsonl": [
        "append:after-write",
        "materialize:after-temp-write",
        "materialize:after-link",
        "materialize:after-dir-fsync",
    ],
    "sqlite": ["sqlite:append:before-commit", "sqlite:append:after-commit"],
    "postgres": ["postgres:append:before-commit", "postgres:append:after-commit"],
}
REPAIRS = {
    "jsonl": ["repair:after-truncate", "repair:after-closer-write"],
    "sqlite": ["sqlite:repair:before-commit", "sqlite:repair:after-commit"],
    "postgres": ["postgres:repair:before-commit", "postgres:repair:after-commit"],
}
MATRIX = [
    *(
        (kind, f"{point}@{hit}")
        for kind, points in FAILPOINTS.items()
        for point in points
        for hit in ((1,) if point.startswith("materialize") else (1, 3, 7))
    ),
    *((kind, f"{point}@1") for kind, points in REPAIRS.items() for point in points),
]


@pytest.mark.process
@pytest.mark.parametrize(
    ("kind", "point"), sample(MATRIX, 0.5, name="chain-matrix", key=lambda c: c[0])
)
def test_the_kill_matrix_s_failpoints_never_raise_a_false_alarm(
    kind: str, point: str, tmp_path: Path
) -> None:
    """A chained writer killed at each backend failpoint of the kill matrix (a repair's too:
    a crashed turn, then a load killed inside its repair), then resumed to the end."""
    from agent_session.session.persistence.failpoints import FAILPOINT_ENV

    store = store_of(kind, tmp_path)
    env = {FAILPOINT_ENV: point}
    if "repair" in point:
        write(store, "--die-at", "20", "--turns", "2")  # a turn left open: the next load repairs
        if point.startswith("repair:after-truncate"):  # and a torn last line for it to cut
            with open(next(Path(store).rglob("session.jsonl")), "ab") as log:
                log.write(b'{"type":"assistant/chu')
    killed = run_module("tests.chain_child", store, "--turns", "2", env=env)
    assert killed.returncode == -9, (point, killed.stdout, killed.stderr)
    if stored(store):
        report = check(store)
        assert report.ok, (point, report.problem)
    write(store, "--turns", "1")
    final = check(store)
    assert final.ok, (point, final.problem)
    assert final.uncovered == 0


def test_a_compressed_log_is_chained_over_its_lines(tmp_path: Path) -> None:
    """A zstd log's chain is over its decompressed lines: it verifies, and the reference
    loads it with the same events."""
    asyncio.run(_two_compressed_turns(tmp_path))
    assert next(tmp_path.rglob("session.jsonl.zstd"))
    report = check(str(tmp_path))
    assert report.ok, report.problem
    assert (len(report.anchors), report.uncovered) == (2, 0)
    theirs = reference_load(tmp_path, "job", "zstd")
    assert "error" not in theirs, theirs
    ours = [orjson.loads(line) for line in raw(str(tmp_path)).splitlines()[1:]]
    assert theirs["events"] == ours


async def _two_compressed_turns(tmp_path: Path) -> None:
    from agent_session import AgentRuntime, ScriptedModel, ScriptedStep, checkpoint_policy

    async with AgentRuntime() as runtime:
        runtime.install(open_store(str(tmp_path), integrity=True, new_session_compression="zstd"))
        runtime.install(checkpoint_policy)
        steps = [ScriptedStep(text=["Some ", "text ", "in ", "deltas."])] * 2
        runtime.models.register("demo", ScriptedModel(steps))
        session = await runtime.sessions.open_or_create("job")
        agent = runtime.agent(session, model="demo/m")
        await agent.run_turn("one")
        await agent.run_turn("two")


def test_a_sqlite_row_s_line_is_its_rendering_whatever_order_the_event_keeps() -> None:
    """An event whose JSONL line keeps another key order (one read from another writer's
    log) is digested as its SQLite row renders, not as its line."""
    from agent_session.persistence_sqlite.rows import event_values, render_row, row_line
    from agent_session.session import SessionEvent

    odd = SessionEvent.from_json({"seq": 3, "type": "turn/start", "time": 5, "data": {"turn": 1}})
    _, seq, kind, time, data, _, _ = event_values("s", odd)
    rendered = render_row((seq, kind.encode(), time, data.encode(), None, None))
    assert odd.encode() != rendered  # (its own line keeps its order)
    assert row_line("s", odd, odd.encode()) == rendered
    plain = SessionEvent.from_json({"type": "turn/start", "seq": 3, "time": 5, "data": {"turn": 1}})
    assert row_line("s", plain, plain.encode()) == plain.encode() == rendered
