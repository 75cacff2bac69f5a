"""``JsonlPersistence`` beyond the shared contract: layout, encoding in both directions, the
scanner's torn-vs-corrupt rules, hostile ids, file modes."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest

from agent_session.persistence_jsonl import FileOps, JsonlPersistence, encode_segment, project_key
from agent_session.persistence_jsonl.encoder import encode_batch
from agent_session.persistence_jsonl.scan import scan_log
from agent_session.session import (
    Runtime,
    SessionCollisionError,
    SessionEvent,
    SessionFormatUnsupportedError,
    SessionHeader,
    SessionPersistenceCorruptionError,
    decode_json,
)
from agent_session.testing.logs import closed_turn, detached, header
from tests.corpus import case_bytes, cases, complete_lines
from tests.rows import expand_row
from tests.sweeps import sample


def final_case(scenario: str) -> dict[str, Any]:
    """The longest prefix case of a scenario: the whole log the reference wrote."""
    prefixes = [c for c in cases() if c["scenario"] == scenario and c["case"].startswith("prefix-")]
    return max(prefixes, key=lambda c: int(c["case"].split("-")[1]))


# --- names -------------------------------------------------------------------------------------


def test_case_39_40_encode_segment() -> None:
    assert encode_segment("..") == "~002E~002E"
    assert encode_segment(".") == "~002E"
    assert encode_segment("a/b") == "a~002Fb"
    assert encode_segment("\x00") == "~0000"
    assert encode_segment("a~b") == "a~007Eb"
    assert encode_segment("plain-ID_1.2") == "plain-ID_1.2"
    assert encode_segment("\ud800") == "~D800"
    assert encode_segment("\udc00") == "~DC00"
    assert encode_segment("😀") == "~D83D~DE00"
    assert encode_segment("~002F") != encode_segment("/")
    with pytest.raises(ValueError, match="empty path segment"):
        encode_segment("")


def test_case_41_project_key() -> None:
    assert project_key("/Users/qyj/work/deepseek-harness") == "--Users-qyj-work-deepseek-harness--"
    assert project_key("C:\\work\\agent") == "--C-work-agent--"
    assert project_key("/开发/~agent") == "--~5F00~53D1-~007Eagent--"
    assert project_key("/") == "--root--"
    assert len(project_key("/" + "a" * 1000)) == 255
    assert project_key("/a/b-c") == project_key("/a-b/c")
    with pytest.raises(ValueError, match="empty project path"):
        project_key("")


def test_case_43_relative_root_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    backend = JsonlPersistence("store")
    where = backend.locate(SessionHeader(id="x", created_at=1, cwd="/work"))
    assert where == str(tmp_path / "store" / "--work--" / "x" / "session.jsonl")


# --- encoding, both directions -----------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["complete:2", "tool:1", "parallel-tool:1", "request:1"])
async def test_writing_the_reference_events_reproduces_the_reference_file(
    scenario: str, tmp_path: Path
) -> None:
    case = final_case(scenario)
    backend = JsonlPersistence(tmp_path)
    await backend.create(case["load"]["meta"])
    await backend.append(case["session_id"], case["inspect"]["events"][: _stored_count(case)])
    path = tmp_path / case["path"]
    assert path.read_bytes() == case_bytes(case)
    loaded = await backend.load(case["session_id"])
    assert [e.to_json() for e in loaded.events] == case["load"]["events"]
    assert path.read_bytes() == case_bytes(case, "file_after_load_b64")
    await backend.aclose()


def _stored_count(case: dict[str, Any]) -> int:
    """How many events the reference's file holds (rows expanded)."""
    total = 0
    for line in complete_lines(case)[1:]:
        raw = decode_json(line)
        total += (
            len(raw["data"].get("texts") or raw["data"].get("args") or []) if "seq0" in raw else 1
        )
    return total


def test_every_corpus_line_re_encodes_identically_packed_or_not() -> None:
    checked = 0
    for case in cases():
        for line in complete_lines(case, "file_after_load_b64")[1:]:
            try:
                raw = decode_json(line)
            except ValueError:
                continue
            if not isinstance(raw, dict):
                continue
            if "seq0" in raw:
                events = [SessionEvent.from_json(e) for e in expand_row(raw)]
                assert encode_batch(events, pack=True) == line + b"\n"
                assert encode_batch(events, pack=False).count(b"\n") == len(events)
            else:
                assert encode_batch([SessionEvent.from_json(raw)], pack=True) == line + b"\n"
            checked += 1
    assert checked > 4000


async def test_case_45_46_47_packing_modes_load_identically(tmp_path: Path) -> None:
    source = detached("p", build=lambda s: None)
    source.append("turn/start", {"turn": 1})
    source.append("step/start", {"turn": 1, "step": 1})
    for text in "abcde":
        source.append(
            "assistant/chunk",
            {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": text}},
        )
    packed = JsonlPersistence(tmp_path / "packed")
    plain = JsonlPersistence(tmp_path / "plain", pack_chunks=False)
    for backend in (packed, plain):
        await backend.create(header("p"))
        await backend.append("p", source.events)
    packed_lines = (tmp_path / "packed/_no-cwd/p/session.jsonl").read_bytes().splitlines()
    plain_lines = (tmp_path / "plain/_no-cwd/p/session.jsonl").read_bytes().splitlines()
    assert [decode_json(x)["type"] for x in packed_lines[1:]] == [
        "turn/start",
        "step/start",
        "text-chunks",
    ]
    assert len(plain_lines) == 1 + 7
    for backend in (packed, plain):
        events = await backend.read_from("p", 0)
        assert [e.encode() for e in events] == [e.encode() for e in source.events]
    await plain.append(
        "p", [source.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})]
    )
    mixed = JsonlPersistence(tmp_path / "plain")
    assert len(await mixed.read_from("p", 0)) == 8
    for backend in (packed, plain, mixed):
        await backend.aclose()


def test_case_48_49_row_expansion_and_malformed_rows() -> None:
    row = {
        "type": "text-chunks",
        "seq0": 1,
        "time0": 2,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [1, 1], "texts": ["a", "b", "c"]},
    }
    members = expand_row(row)
    assert [(m["seq"], m["time"], m["data"]["chunk"]["text"]) for m in members] == [
        (1, 2, "a"),
        (2, 3, "b"),
        (3, 4, "c"),
    ]
    bad = {**row, "data": {**row["data"], "dt": [1]}}
    with pytest.raises(ValueError, match="malformed text-chunks storage row"):
        expand_row(bad)


def _text_row(**data: Any) -> dict[str, Any]:
    base = {"turn": 1, "step": 1, "index": 0, "dt": [1, 1], "texts": ["a", "b", "c"]}
    return {"type": "text-chunks", "seq0": 1, "time0": 2, "data": {**base, **data}}


MAX = 2**53 - 1


@pytest.mark.parametrize(
    ("row", "why"),
    [
        (_text_row(texts=[]), "texts must be a non-empty array of strings"),
        (_text_row(texts=["a", 2, "c"]), "texts must be a non-empty array of strings"),
        (_text_row(texts="abc"), "texts must be a non-empty array of strings"),
        (_text_row(texts=["a", "\ud800", "c"]), "texts must be valid text"),
        (_text_row(dt=[1]), "dt must hold one safe integer"),
        (_text_row(dt=[1, True]), "dt must hold one safe integer"),
        (_text_row(dt=[1, 1.5]), "dt must hold one safe integer"),
        (_text_row(dt=[1, "1"]), "dt must hold one safe integer"),
        (_text_row(dt=[1, MAX + 1]), "dt must hold one safe integer"),
        (_text_row(dt=[-MAX - 1, 1]), "dt must hold one safe integer"),
        (_text_row(dt=[MAX, 1]), "time out of the safe-integer range"),
        ({**_text_row(dt=[MAX + 1, 0]), "time0": -MAX}, "dt must hold one safe integer"),
        (_text_row(dt=[-MAX, -5]), "time out of the safe-integer range"),
        (_text_row(turn="1"), "turn, step and index must be numbers"),
        (_text_row(extra=1), "unexpected data keys"),
        ({**_text_row(), "seq0": -1}, "seq0 and time0 must be safe integers"),
        ({**_text_row(), "time0": MAX + 1}, "seq0 and time0 must be safe integers"),
        ({**_text_row(), "seq0": MAX - 1}, "seq out of the safe-integer range"),
        ({**_text_row(), "extra": 1}, "unexpected envelope keys"),
        (
            {
                "type": "tool-call-chunks",
                "seq0": 1,
                "time0": 2,
                "data": {"turn": 1, "step": 1, "index": 0, "dt": [0], "id": 7, "args": ["{", "}"]},
            },
            "id and name must be strings",
        ),
    ],
)
def test_each_malformed_row_is_refused_naming_the_defect(row: dict[str, Any], why: str) -> None:
    with pytest.raises(ValueError, match=f"malformed {row['type']} storage row: {why}"):
        expand_row(row)


def test_row_members_keep_each_time_up_to_the_safe_limits() -> None:
    """The largest legal times and steps are kept exactly (no float rounding)."""
    members = expand_row(_text_row(dt=[MAX - 2, -(MAX - 2)]))
    assert [m["time"] for m in members] == [2, MAX, 2]
    widest = expand_row({**_text_row(dt=[MAX, MAX]), "time0": -MAX})
    assert [m["time"] for m in widest] == [-MAX, 0, MAX]
    named = expand_row(
        {
            "type": "tool-call-chunks",
            "seq0": 4,
            "time0": 0,
            "data": {
                "turn": 1,
                "step": 2,
                "index": 0,
                "dt": [0, 3],
                "id": "c",
                "name": "ls",
                "args": ["{", "", "}"],
            },
        }
    )
    assert [m["data"]["chunk"] for m in named] == [
        {"type": "tool-call-delta", "index": 0, "id": "c", "name": "ls", "argumentsDelta": a}
        for a in ("{", "", "}")
    ]
    assert [(m["seq"], m["time"]) for m in named] == [(4, 0), (5, 0), (6, 3)]


def test_a_packed_row_out_of_sequence_is_a_seq_gap() -> None:
    """The scanner checks a packed row's place by its first member (the rest follow it)."""
    row = b'{"type":"text-chunks","seq0":%d,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["a","b","c"]}}\n'
    start = line("turn/start", 0)
    fine = scan_log(HEADER + start + row % 1 + line("turn/end", 4), "p")
    assert [e.seq if hasattr(e, "seq") else e["seq"] for e in fine.events] == [0, 1, 2, 3, 4]
    for seq0 in (0, 2):
        with pytest.raises(SessionPersistenceCorruptionError, match="seq gap"):
            scan_log(HEADER + start + row % seq0 + line("turn/end", seq0 + 3), "p")


# --- the scanner -------------------------------------------------------------------------------

HEADER = b'{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}\n'


def line(type: str, seq: int, **data: Any) -> bytes:
    return b'{"type":"%s","seq":%d,"time":1,"data":%s}\n' % (
        type.encode(),
        seq,
        (str(data).replace("'", '"') if data else "{}").encode(),
    )


def test_case_52_53_59_header_and_torn_fragments() -> None:
    for bad in (b"", HEADER[:-1]):
        with pytest.raises(SessionPersistenceCorruptionError, match="header-less"):
            scan_log(bad, "p")
    only = scan_log(HEADER, "p")
    assert (only.events, only.committed_bytes, only.torn) == ([], len(HEADER), False)
    torn = scan_log(HEADER + line("turn/start", 0) + b"ignored torn tail", "p")
    assert [e["seq"] for e in torn.events] == [0]
    assert torn.committed_bytes == len(HEADER + line("turn/start", 0))
    assert torn.torn


def test_case_54_56_57_58_defects_before_and_after_turn_end() -> None:
    start, gap_end = line("turn/start", 0), line("turn/end", 1)
    tolerated = scan_log(HEADER + start + b"{not json\n" + line("step/start", 1), "p")
    assert [e["seq"] for e in tolerated.events] == [0]
    assert tolerated.torn
    with pytest.raises(
        SessionPersistenceCorruptionError, match=r'unparsable committed event at line 3 in "p"'
    ):
        scan_log(HEADER + start + b"{not json\n" + gap_end, "p")
    with pytest.raises(SessionPersistenceCorruptionError, match="unparsable committed event"):
        scan_log(HEADER + b"{not json\n" + gap_end, "p")
    with pytest.raises(
        SessionPersistenceCorruptionError,
        match=r"seq gap in committed region at line 2 \(expected 0, got 1\)",
    ):
        scan_log(HEADER + line("turn/end", 1), "p")
    assert [e["seq"] for e in scan_log(HEADER + start + line("step/start", 2), "p").events] == [0]
    with pytest.raises(SessionPersistenceCorruptionError, match="seq gap"):
        scan_log(HEADER + start + line("step/start", 2) + line("turn/end", 3), "p")
    after_end = scan_log(HEADER + start + gap_end + line("step/start", 9), "p")
    assert [e["seq"] for e in after_end.events] == [0, 1]
    for junk in (b"\n", b"null\n", b"[1]\n", b'"x"\n'):
        assert scan_log(HEADER + start + junk, "p").events == [decode_json(start)]


def test_case_60_to_64_header_rules() -> None:
    def header_line(**fields: Any) -> bytes:
        base: dict[str, Any] = {
            "type": "session",
            "version": 0,
            "id": "s",
            "createdAt": 1,
            "delegationDepth": 0,
        }
        base.update(fields)
        text = ",".join(f'"{k}":{v!r}'.replace("'", '"') for k, v in base.items() if v is not None)
        return ("{" + text + "}\n").encode()

    for bad in (
        {"createdAt": 1.5},
        {"createdAt": -1},
        {"createdAt": 2**53},
        {"delegationDepth": None},
        {"delegationDepth": "1"},
        {"delegationDepth": 1.5},
        {"delegationDepth": -1},
        {"agentPreset": 7},
    ):
        with pytest.raises(SessionPersistenceCorruptionError, match="not a session header"):
            scan_log(header_line(**bad), "p")
    assert scan_log(header_line(agentPreset="minimal"), "p").header.agent_preset == "minimal"
    for retired in ("sandboxMode", "approvalPolicy"):
        with pytest.raises(SessionPersistenceCorruptionError, match="retired policy baseline"):
            scan_log(header_line(**{retired: "x"}), "p")
    with pytest.raises(
        SessionFormatUnsupportedError,
        match=r'session "s" uses log format v42.*newer harness.*\(raw log: p\)',
    ):
        scan_log(b'{"type":"session","version":42,"id":"s","futureOnly":true}\n', "p")
    with pytest.raises(SessionFormatUnsupportedError, match='session "123" uses log format v42'):
        scan_log(b'{"type":"session","version":42,"id":123}\n', "p")
    with pytest.raises(SessionPersistenceCorruptionError, match="not a session header"):
        scan_log(b"42\n", "p")
    with pytest.raises(SessionPersistenceCorruptionError, match="header line is not valid JSON"):
        scan_log(b"{nope\n", "p")
    assert scan_log(header_line(extra="kept out"), "p").header.to_json() == {
        "version": 0,
        "id": "s",
        "createdAt": 1,
        "delegationDepth": 0,
    }


@pytest.mark.slow
async def test_torn_tail_sweep_every_byte_offset(tmp_path: Path) -> None:
    """Cut a real two-turn log at every byte (a seeded twelfth of them in make test): inspect
    and load return the longest valid prefix plus closers, or refuse as corrupt; nothing
    else, never a hang. Longer than 20 s when exhaustive: 28,000 cold reads and repairs."""
    from agent_session.recovery import closers

    case = final_case("complete:2")
    data = case_bytes(case)
    all_events = [SessionEvent.from_json(e) for e in case["inspect"]["events"]]
    ends = [i + 1 for i, byte in enumerate(data) if byte == 0x0A]
    counts = [0]  # events held by the first n complete lines after the header
    for lineno in range(1, len(ends)):
        raw = decode_json(data[ends[lineno - 1] : ends[lineno] - 1])
        counts.append(counts[-1] + (len(expand_row(raw)) if "seq0" in raw else 1))
    # 28,000 cold reads and repairs: on tmpfs when the machine has one (real files and real
    # fsync calls, without waiting for a disk).
    root = Path(tempfile.mkdtemp(dir="/dev/shm")) if os.path.isdir("/dev/shm") else tmp_path
    path = root / case["path"]
    path.parent.mkdir(parents=True)
    backend = JsonlPersistence(root)
    outcomes = {"balanced": 0, "corrupt": 0}
    cuts = sample(range(len(data) + 1), 0.08, name="torn tail of a plain log")
    for cut in cuts:
        whole_lines = sum(1 for end in ends if end <= cut)
        if whole_lines == 0:
            expected = None
        else:
            prefix = all_events[: counts[whole_lines - 1]]
            expected = [e.to_json() for e in prefix + closers(prefix)]
        for method in ("inspect", "load"):
            path.write_bytes(data[:cut])
            try:
                stored = await getattr(backend, method)(case["session_id"])
            except SessionPersistenceCorruptionError:
                assert expected is None, f"cut {cut}: {method} refused a valid prefix"
                outcomes["corrupt"] += 1
                continue
            assert expected is not None, f"cut {cut}"
            assert [e.to_json() for e in stored.events] == expected, f"cut {cut} {method}"
            outcomes["balanced"] += 1
        backend.ledger.forget(case["session_id"])
    # (more than seven in ten reads are of a valid prefix: 20,000 of 28,000 when exhaustive)
    assert outcomes["balanced"] > 0.7 * 2 * len(cuts)
    await backend.aclose()
    shutil.rmtree(root, ignore_errors=True)


# --- layout and discovery ----------------------------------------------------------------------


async def test_lazy_materialization_and_modes(tmp_path: Path) -> None:
    root = tmp_path / "store"
    backend = JsonlPersistence(root)
    await backend.create(header("m", cwd="/work/proj"))
    assert not root.exists()
    await backend.append("m", detached("m").events)
    log = root / "--work-proj--" / "m" / "session.jsonl"
    assert log.exists()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    for directory in (root, root / "--work-proj--", root / "--work-proj--" / "m"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert sorted(os.listdir(log.parent)) == ["session.jsonl", "session.lock"]  # no temp file
    assert stat.S_IMODE((log.parent / "session.lock").stat().st_mode) == 0o600
    await backend.aclose()


async def test_stale_temp_files_are_ignored_and_cleaned(tmp_path: Path) -> None:
    directory = tmp_path / "_no-cwd" / "t"
    directory.mkdir(parents=True)
    stale = directory / "session.jsonl.0123456789ab.tmp"
    stale.write_bytes(HEADER)
    backend = JsonlPersistence(tmp_path)
    assert await backend.list_headers() == []
    await backend.create(header("t"))
    await backend.append("t", detached("t").events)
    assert sorted(os.listdir(directory)) == ["session.jsonl", "session.lock"]
    await backend.aclose()


async def test_hostile_ids_stay_under_the_root_and_round_trip(tmp_path: Path) -> None:
    root = tmp_path / "root"
    backend = JsonlPersistence(root)
    ids = ["../x", "a/b", ".", "..", "\x00", "😀", "~" * 200, "../../etc/pwn", "/abs"]
    for id in ids:
        await backend.create(header(id))
        await backend.append(id, detached(id).events)
    assert sorted(h.id for h in await backend.list_headers()) == sorted(ids)
    for directory, _, files in os.walk(tmp_path):
        for name in files:
            assert Path(directory, name).resolve().is_relative_to(root.resolve())
    for id in ids:
        assert len((await backend.load(id)).events) == 6
    await backend.aclose()


@pytest.mark.parametrize(
    ("bad_id", "why"),
    [("x" * 10_000, "too long to store"), ("a\ud800", "lone surrogate U\\+D800"), ("", "empty")],
)
async def test_unstorable_ids_are_refused_at_create(tmp_path: Path, bad_id: str, why: str) -> None:
    backend = JsonlPersistence(tmp_path / "root")
    with pytest.raises(ValueError, match=why):
        await backend.create(header(bad_id))
    assert not (tmp_path / "root").exists()


async def test_case_30_31_duplicates_and_flat_or_compressed_layouts(tmp_path: Path) -> None:
    one = JsonlPersistence(tmp_path / "dup")
    for cwd in ("/a", "/b"):
        path = one.locate(SessionHeader(id="d", created_at=1, cwd=cwd))
        os.makedirs(os.path.dirname(path))
        Path(path).write_bytes(
            b'{"type":"session","version":0,"id":"d","createdAt":1,"cwd":"%s",'
            b'"delegationDepth":0}\n' % cwd.encode()
        )
    with pytest.raises(SessionPersistenceCorruptionError, match="multiple project directories"):
        await one.load("d")
    with pytest.raises(SessionPersistenceCorruptionError, match="multiple project directories"):
        await one.list_headers()
    # Deliberately narrower than the reference, which refuses the whole root once it sees
    # one such artifact: the reference's refusal applies to the id the artifact belongs to;
    # every other session of the root loads, lists and is created as usual.
    root = tmp_path / "foreign"
    (root / "_no-cwd" / "z").mkdir(parents=True)
    (root / "_no-cwd" / "old.jsonl").write_bytes(HEADER)
    (root / "_no-cwd" / "older.jsonl.zstd").write_bytes(b"")
    (root / "_no-cwd" / "z" / "session.jsonl.zstd").write_bytes(b"")
    backend = JsonlPersistence(root)
    for id in ("old", "older"):
        with pytest.raises(SessionFormatUnsupportedError, match="flat-file layout"):
            await backend.load(id)
    with pytest.raises(SessionFormatUnsupportedError, match=r'compression "none"'):
        await JsonlPersistence(root, compression="none").load("z")
    with pytest.raises(SessionPersistenceCorruptionError, match="header-less Zstandard"):
        await backend.load("z")  # auto reads a compressed log: this one is empty
    (root / "_no-cwd" / "fine").mkdir()
    (root / "_no-cwd" / "fine" / "session.jsonl").write_bytes(
        b'{"type":"session","version":0,"id":"fine","createdAt":1,"delegationDepth":0}\n'
    )
    assert (await backend.load("fine")).header.id == "fine"
    assert [h.id for h in await backend.list_headers()] == ["fine"]
    with pytest.raises(SessionFormatUnsupportedError, match="flat-file layout"):
        await backend.create(header("old"))
    await backend.create(header("new"))
    await backend.append("new", detached("new").events)
    assert (await backend.load("new")).events
    await backend.aclose()


async def test_case_27_29_32_33_list_rules(tmp_path: Path) -> None:
    backend = JsonlPersistence(tmp_path)
    for name, content in {"empty": b"", "nonl": b'{"type":"session"', "junk": b"hello\n"}.items():
        (tmp_path / "_no-cwd" / name).mkdir(parents=True)
        (tmp_path / "_no-cwd" / name / "session.jsonl").write_bytes(content)
    (tmp_path / "_no-cwd" / "dironly").mkdir()
    big = "x" * 20_000
    (tmp_path / "_no-cwd" / "big").mkdir()
    (tmp_path / "_no-cwd" / "big" / "session.jsonl").write_bytes(
        b'{"type":"session","version":0,"id":"big","createdAt":1,"delegationDepth":0,'
        b'"agentPreset":"%s"}\n' % big.encode()
    )
    assert [h.id for h in await backend.list_headers()] == ["big"]
    (tmp_path / "_no-cwd" / "moved").mkdir()
    (tmp_path / "_no-cwd" / "moved" / "session.jsonl").write_bytes(
        b'{"type":"session","version":0,"id":"moved","createdAt":1,"cwd":"/elsewhere",'
        b'"delegationDepth":0}\n'
    )
    with pytest.raises(SessionPersistenceCorruptionError, match="and cwd identify"):
        await backend.list_headers()


async def test_case_37_root_must_be_a_directory(tmp_path: Path) -> None:
    not_dir = tmp_path / "file"
    not_dir.write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        JsonlPersistence(not_dir)
    assert await JsonlPersistence(tmp_path / "missing").list_headers() == []


async def test_a_root_whose_parents_are_missing_is_created_on_the_first_write(
    tmp_path: Path,
) -> None:
    root = tmp_path / "a" / "b" / "root"
    backend = JsonlPersistence(root)
    await backend.create(header("s"))
    await backend.append("s", detached("s").events)
    await backend.aclose()
    for directory in (tmp_path / "a", tmp_path / "a" / "b", root, root / "_no-cwd" / "s"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    assert len((await JsonlPersistence(root).load("s")).events) == len(detached("s").events)


async def test_a_root_removed_after_a_first_write_is_made_again_for_the_next(
    tmp_path: Path,
) -> None:
    """The storage makes a new session's directory in a project directory it has made with
    one ``mkdir``; when that project directory (here the whole root) is gone, it is made
    again, with the root, as for the first session."""
    root = tmp_path / "root"
    backend = JsonlPersistence(root)
    await backend.create(header("one"))
    await backend.append("one", detached("one").events)
    shutil.rmtree(root)
    await backend.create(header("two"))
    await backend.append("two", detached("two").events)
    await backend.aclose()
    assert sorted(os.listdir(root / "_no-cwd")) == ["two"]
    assert len((await JsonlPersistence(root).load("two")).events) == len(detached("two").events)


async def test_an_existing_log_is_never_overwritten_by_materialization(tmp_path: Path) -> None:
    first = JsonlPersistence(tmp_path)
    await first.create(header("once"))
    second = JsonlPersistence(tmp_path)
    await second.create(header("once", createdAt=2000))  # both think the id is new
    await first.append("once", detached("once").events)
    with pytest.raises(SessionCollisionError, match=r"being written by another writer \(pid"):
        await second.append("once", detached("once").events)  # first still holds the lock
    await first.aclose()  # releases the writer lock
    with pytest.raises(SessionCollisionError, match="a log already exists on disk"):
        await second.append("once", detached("once").events)
    assert len(await JsonlPersistence(tmp_path).read_from("once", 0)) == 6
    await second.aclose()


class _RacedOps(FileOps):
    """Another writer's log appears at the final name just before this writer links its
    own there (after every check this writer made)."""

    def link(self, source: str, target: str) -> None:
        Path(target).write_bytes(b"another writer's log\n")
        super().link(source, target)


async def test_a_log_another_writer_links_first_is_refused_and_kept(tmp_path: Path) -> None:
    backend = JsonlPersistence(tmp_path, ops=_RacedOps())
    await backend.create(header("raced"))
    with pytest.raises(SessionCollisionError, match="a log already exists on disk"):
        await backend.append("raced", detached("raced").events)
    directory = tmp_path / "_no-cwd" / "raced"
    assert (directory / "session.jsonl").read_bytes() == b"another writer's log\n"
    assert sorted(os.listdir(directory)) == ["session.jsonl", "session.lock"]  # no temp left
    await backend.aclose()


async def test_revisions_are_source_qualified(tmp_path: Path) -> None:
    a, b = JsonlPersistence(tmp_path / "a"), JsonlPersistence(tmp_path / "b")
    for backend in (a, b):
        await backend.create(header("r"))
        await backend.append("r", detached("r").events)
    again = JsonlPersistence(tmp_path / "a")
    assert (await a.list_snapshots())[0].revision == (await again.list_snapshots())[0].revision
    assert (await a.list_snapshots())[0].revision != (await b.list_snapshots())[0].revision
    stored = await a.storage.load("r")
    assert stored is not None
    assert stored.revision == await a.storage.revision("r")
    assert await a.storage.revision("nope") is None


async def test_live_sessions_through_the_store_write_reference_bytes(tmp_path: Path) -> None:
    backend = JsonlPersistence(tmp_path)
    runtime = Runtime(clock=lambda: 42)
    runtime.install(backend)
    session = runtime.sessions.create("live", cwd="/w")
    closed_turn(session)
    await runtime.sessions.flush(session)
    raw = await backend.read_raw("live")
    assert raw is not None
    lines = raw.content.splitlines()
    assert lines[0] == (
        b'{"type":"session","version":0,"id":"live","createdAt":42,"cwd":"/w","delegationDepth":0}'
    )
    assert lines[1:] == [e.encode() for e in session.events]
    await backend.aclose()


@pytest.mark.parametrize("length", [244, 245, 250, 254, 255, 256])
async def test_ids_whose_name_is_up_to_255_characters_are_stored_and_loaded(
    tmp_path: Path, length: int
) -> None:
    """A session directory name of 245-255 characters is fine; only the reference's flat
    artifact names beside it (``<name>.jsonl.zstd``) would be too long, and so cannot exist."""
    id = "b" * length
    runtime = Runtime()
    runtime.install(JsonlPersistence(tmp_path))
    session = runtime.sessions.create(id)
    session.append("turn/start", {"turn": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    await runtime.sessions.flush(session)
    await runtime.sessions.dispose(session)
    again = JsonlPersistence(tmp_path)
    assert [e.type for e in (await again.load(id)).events] == ["turn/start", "turn/end"]
    await again.aclose()
    if length <= 255:  # stored under its own name, as the reference lays it out
        assert (tmp_path / "_no-cwd" / id / "session.jsonl").exists()
