"""The compressed log against the reference's frames and against hostile files: every frame
of the reference's corpus re-encodes byte for byte; a log written here has the reference's
frame layout and plaintext; bad magic, reserved bits, flipped bytes, a truncated checksum,
trailing zeros and a decompression bomb are each refused (or, for a torn final frame, cut)
with the reference's message and bounded memory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import zstandard

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.persistence_jsonl.convert import convert
from agent_session.persistence_jsonl.scan import scan_log
from agent_session.persistence_jsonl.zstd import MAGIC, compress_frame, scan_frames, zstd_plaintext
from agent_session.session import (
    Runtime,
    SessionCollisionError,
    SessionEvent,
    SessionFormatUnsupportedError,
    SessionPersistenceCorruptionError,
)
from tests import stores
from tests.corpus import case_bytes, cases
from tests.forkserver import run_cli
from tests.sweeps import sample

HEADER = stores.HEADER % b"z"
START, END = stores.TURN.splitlines(keepends=True)
ORIGINAL = [json.loads(START), json.loads(END)]
PREFIXES = [c for c in cases("upstream-v0-zstd") if c["case"].startswith("prefix-")]


def frames_of(data: bytes) -> list[bytes]:
    found = scan_frames(data, "p")
    assert found.torn_start is None
    return [data[start:end] for start, end in found.complete]


@pytest.mark.parametrize("case", PREFIXES, ids=lambda c: f"{c['scenario']}/{c['case']}")
def test_every_frame_of_the_reference_re_encodes_byte_for_byte(case: dict[str, object]) -> None:
    frames = frames_of(case_bytes(case))
    assert frames
    for frame in frames:
        plaintext = zstandard.ZstdDecompressor().decompress(frame, max_output_size=1 << 24)
        assert compress_frame(plaintext) == frame


def test_the_corpus_has_prefixes_of_every_scenario() -> None:
    assert {c["scenario"] for c in PREFIXES} == {
        "complete:2",
        "tool:1",
        "parallel-tool:1",
        "request:1",
    }


async def write_two_turns(root: Path, compression: str) -> Path:
    async with Runtime(clock=lambda: 7) as runtime:
        runtime.install(JsonlPersistence(root, new_session_compression=compression))
        session = runtime.sessions.create("w")
        for turn in (1, 2):
            session.append("turn/start", {"turn": turn})
            session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
            await runtime.sessions.flush(session)
    return root / "_no-cwd" / "w"


async def test_a_compressed_log_holds_the_plain_logs_bytes_in_the_references_frames(
    tmp_path: Path,
) -> None:
    plain = (await write_two_turns(tmp_path / "plain", "none")) / "session.jsonl"
    packed = (await write_two_turns(tmp_path / "zstd", "zstd")) / "session.jsonl.zstd"
    assert not packed.with_name("session.jsonl").exists()
    frames = frames_of(packed.read_bytes())
    plaintexts = [zstandard.ZstdDecompressor().decompress(f, 1 << 20) for f in frames]
    assert len(frames) == 3  # the header alone, then one frame per durable batch
    assert plaintexts[0].count(b"\n") == 1
    assert b"".join(plaintexts) == plain.read_bytes()  # the same lines, byte for byte
    assert [len(p.splitlines()) for p in plaintexts] == [1, 2, 2]
    again = await JsonlPersistence(tmp_path / "zstd", compression="zstd").load("w")
    assert [e.type for e in again.events] == ["turn/start", "turn/end"] * 2
    assert packed.read_bytes() == b"".join(frames)  # loading a balanced log wrote nothing


def plant(root: Path, data: bytes) -> Path:
    path = root / "_no-cwd" / "z" / "session.jsonl.zstd"
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    return path


def good_log() -> bytes:
    return compress_frame(HEADER) + compress_frame(START) + compress_frame(END)


async def refused(root: Path, data: bytes, message: str) -> None:
    path = plant(root, data)
    for attempt in ("inspect", "load"):
        backend = JsonlPersistence(root)
        with pytest.raises(SessionPersistenceCorruptionError, match=message):
            await getattr(backend, attempt)("z")
        await backend.aclose()
    assert path.read_bytes() == data  # refused: nothing was written


async def test_bad_magic_reserved_bits_and_trailing_zeros(tmp_path: Path) -> None:
    log = good_log()
    first = len(compress_frame(HEADER))
    await refused(tmp_path / "magic", b"XXXX" + log[4:], "invalid frame magic at byte 0")
    reserved = bytearray(log)
    reserved[first + 4] |= 0x08
    await refused(
        tmp_path / "bit", bytes(reserved), f"reserved frame-header bit at byte {first + 4}"
    )
    await refused(tmp_path / "zeros", log + bytes(64), f"invalid frame magic at byte {len(log)}")
    block = bytearray(log)
    descriptor = block[first + 4]
    header_size = 1 + (0 if descriptor & 0x20 else 1)  # no dictionary or content size here
    at = first + 4 + header_size
    block[at] |= 0b110  # block type 3: reserved
    await refused(tmp_path / "block", bytes(block), f"reserved block type at byte {at}")


@pytest.mark.parametrize("frame", [0, 1, 2])
async def test_a_flipped_byte_in_each_frame_is_refused(tmp_path: Path, frame: int) -> None:
    log = good_log()
    start, end = scan_frames(log, "p").complete[frame]
    for offset in range(start + 6, end):  # past the magic and the descriptor
        flipped = bytearray(log)
        flipped[offset] ^= 0x40
        root = tmp_path / str(offset)
        path = plant(root, bytes(flipped))
        backend = JsonlPersistence(root)
        try:
            examined = await backend.diagnose("z")
        except SessionPersistenceCorruptionError:
            continue  # refused: the damage was seen
        finally:
            await backend.aclose()
        # Otherwise the flip moved where a frame seems to end: a torn final frame, whose
        # loss is visible, never a committed event that silently changed.
        stored = examined.session.events[: examined.stored_events]  # closers left out
        events = [e.to_json() for e in stored]
        assert events == ORIGINAL[: len(events)]
        assert path.read_bytes() == bytes(flipped)


async def test_a_truncated_checksum_is_a_torn_frame_whose_lines_are_recovered(
    tmp_path: Path,
) -> None:
    log = good_log()
    path = plant(tmp_path, log[:-2])  # the last frame lost half its checksum
    backend = JsonlPersistence(tmp_path)
    inspected = await backend.inspect("z")
    assert [e.type for e in inspected.events] == ["turn/start", "turn/end"]
    assert path.read_bytes() == log[:-2]
    loaded = await backend.load("z")
    assert [e.type for e in loaded.events] == ["turn/start", "turn/end"]
    assert path.read_bytes() == log  # cut at the torn start, the recovered line re-framed
    await backend.aclose()


BOMB = """
import asyncio, sys
from agent_session.persistence_jsonl import JsonlPersistence
async def main():
    backend = JsonlPersistence(sys.argv[1], max_log_bytes=int(sys.argv[2]))
    try:
        await backend.inspect("z")
    except Exception as e:
        print(type(e).__name__, e)
    # This process's own peak: ru_maxrss would include the parent's, inherited across exec.
    with open("/proc/self/status") as status:
        peak = next(line for line in status if line.startswith("VmHWM:"))
    print(int(peak.split()[1]) // 1024)
asyncio.run(main())
"""


@pytest.mark.process
def test_a_decompression_bomb_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    compressor = zstandard.ZstdCompressor(level=19, write_checksum=True, write_content_size=False)
    stream = compressor.compressobj()
    bomb = b"".join(stream.compress(bytes(1 << 24)) for _ in range(256)) + stream.flush()
    assert len(bomb) < 1 << 20  # a small file ...
    plant(tmp_path, compress_frame(HEADER) + bomb)  # ... that expands to 4 GiB
    assert bomb.startswith(MAGIC)
    done = subprocess.run(
        [sys.executable, "-c", BOMB, str(tmp_path), str(64 << 20)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    verdict, rss = done.stdout.splitlines()[-2:]
    assert verdict.startswith("SessionPersistenceCorruptionError"), (done.stdout, done.stderr)
    assert "expands to more than max_log_bytes" in verdict, (done.stdout, done.stderr)
    assert int(rss) < 300, f"peaked at {rss} MiB"


@pytest.mark.slow
async def test_torn_sweep_every_byte_of_a_compressed_log(tmp_path: Path) -> None:
    """Cut the reference's two-turn compressed log at every byte: inspect and load return a
    prefix of its events (at least every complete frame's, at most the torn frame's too) plus
    the closers of that prefix, or refuse a header-less file; after load the file is whole
    frames again and loads to the same events. A seeded twelfth of the bytes in make test;
    longer than 20 s when exhaustive."""
    from agent_session.recovery import closers

    complete = [c for c in PREFIXES if c["scenario"] == "complete:2"]
    case = max(complete, key=lambda c: len(case_bytes(c)))
    data = case_bytes(case)
    everything = [SessionEvent.from_json(e) for e in case["inspect"]["events"]]
    spans = scan_frames(data, "p").complete
    per_frame = [
        len(scan_log(zstd_plaintext(data[:end], "p", 1 << 30), "p").events) for _, end in spans
    ]
    root = Path(tempfile.mkdtemp(dir="/dev/shm")) if os.path.isdir("/dev/shm") else tmp_path
    path = root / case["path"]
    path.parent.mkdir(parents=True)
    outcomes = {"loaded": 0, "refused": 0}
    cuts = sample(range(len(data) + 1), 0.08, name="torn tail of a compressed log")
    for cut in cuts:
        whole = sum(1 for _, end in spans if end <= cut)
        least = per_frame[whole - 1] if whole else 0
        most = per_frame[min(whole, len(spans) - 1)]
        for method in ("inspect", "load"):
            path.write_bytes(data[:cut])
            backend = JsonlPersistence(root)
            if whole == 0:  # not even the header's frame is whole
                with pytest.raises(SessionPersistenceCorruptionError, match="header-less"):
                    await getattr(backend, method)(case["session_id"])
                outcomes["refused"] += 1
                continue
            stored = await getattr(backend, method)(case["session_id"])
            await backend.aclose()
            events = [e.to_json() for e in stored.events]
            kept = next(
                n
                for n in range(most, least - 1, -1)
                if events == [e.to_json() for e in everything[:n] + closers(everything[:n])]
            )
            assert least <= kept <= most, f"cut {cut}"
            outcomes["loaded"] += 1
            if method == "load":
                assert scan_frames(path.read_bytes(), "p").torn_start is None
                again = JsonlPersistence(root)
                assert [
                    e.to_json() for e in (await again.load(case["session_id"])).events
                ] == events
                await again.aclose()
    shutil.rmtree(root, ignore_errors=True)
    assert outcomes == {
        "loaded": 2 * sum(1 for cut in cuts if cut >= spans[0][1]),
        "refused": 2 * sum(1 for cut in cuts if cut < spans[0][1]),
    }


@pytest.mark.process
@pytest.mark.parametrize("mode", ["request", "tool", "parallel-tool", "midstream", "post-step"])
async def test_the_stack_killed_at_each_failpoint_on_a_compressed_log(
    tmp_path: Path, mode: str
) -> None:
    """The crash child writes the reference's default compressed log and is SIGKILLed: every
    prefix it reported durable is there, byte for byte; the repaired log is whole frames, a
    second load changes nothing, and the session resumes and runs another turn."""
    from tests.test_crash import check_after_crash, resume_and_continue, run_child

    store = str(tmp_path)
    reports = run_child(store, mode, "--compression", "zstd")
    assert reports
    log = tmp_path / "_no-cwd" / "crash" / "session.jsonl.zstd"
    assert not log.with_name("session.jsonl").exists()
    before = await check_after_crash(store, reports)
    repaired = log.read_bytes()
    assert scan_frames(repaired, "p").torn_start is None
    for frame in frames_of(repaired):  # as the reference would compress each of them
        plaintext = zstandard.ZstdDecompressor().decompress(frame, max_output_size=1 << 24)
        assert compress_frame(plaintext) == frame
    again = await JsonlPersistence(tmp_path, compression="zstd").load("crash")
    assert [e.encode() for e in again.events] == [e.encode() for e in before]
    assert log.read_bytes() == repaired
    await resume_and_continue(store, before)
    assert not log.with_name("session.jsonl").exists()  # resumed in its own encoding


async def test_convert_both_ways_keeps_every_event_and_finishes_an_interrupted_run(
    tmp_path: Path,
) -> None:
    directory = await write_two_turns(tmp_path, "none")
    plain, packed = directory / "session.jsonl", directory / "session.jsonl.zstd"
    original = plain.read_bytes()
    storage = JsonlPersistence(tmp_path).jsonl
    done = await convert(storage, "w", "zstd")
    assert (done.old, done.new) == (str(plain), str(packed))
    assert not plain.exists()
    assert (
        b"".join(
            zstandard.ZstdDecompressor().decompress(f, 1 << 20)
            for f in frames_of(packed.read_bytes())
        )
        == original
    )
    assert len(frames_of(packed.read_bytes())) == 2  # the header, then the events
    assert (await convert(storage, "w", "zstd")).old is None  # already: nothing to do
    await convert(storage, "w", "none")
    assert plain.read_bytes() == original
    assert not packed.exists()
    # A conversion that stopped after the new file was durable left both: loads refuse the
    # session, and running the conversion again finishes it.
    packed.write_bytes(compress_frame(original[: original.index(b"\n") + 1]))
    packed.write_bytes(packed.read_bytes() + compress_frame(original[original.index(b"\n") + 1 :]))
    with pytest.raises(SessionFormatUnsupportedError, match="interrupted `agent-session convert`"):
        await JsonlPersistence(tmp_path).load("w")
    await convert(storage, "w", "zstd")
    assert not plain.exists()
    assert [e.type for e in (await JsonlPersistence(tmp_path).load("w")).events][-1] == "turn/end"


async def test_convert_refuses_a_torn_log_and_a_session_another_writer_holds(
    tmp_path: Path,
) -> None:
    directory = await write_two_turns(tmp_path, "none")
    log = directory / "session.jsonl"
    with open(log, "ab") as f:
        f.write(b'{"type":"turn/sta')
    storage = JsonlPersistence(tmp_path).jsonl
    with pytest.raises(SessionPersistenceCorruptionError, match="torn tail"):
        await convert(storage, "w", "zstd")
    assert not (directory / "session.jsonl.zstd").exists()
    holder = JsonlPersistence(tmp_path)
    await holder.load("w")  # repairs, and holds the writer lock
    with pytest.raises(SessionCollisionError, match="another writer"):
        await convert(JsonlPersistence(tmp_path).jsonl, "w", "zstd")
    await holder.aclose()
    assert (await convert(storage, "w", "zstd")).old == str(log)


@pytest.mark.process
def test_the_cli_lists_converts_and_exports_compressed_sessions(tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, timeout=120)

    root = str(tmp_path / "store")
    made = cli("demo", "--root", root, "--session-id", "z", "--compression", "zstd")
    assert made.returncode == 0, made.stderr
    assert "a zstd-compressed JSONL file" in made.stdout
    listed = cli("ls", root)
    assert listed.stdout.splitlines()[0].split()[8:10] == ["STATE", "BACKEND"]
    assert listed.stdout.splitlines()[1].split()[9] == "jsonl+zstd"
    plain = cli("export", root, "z", "--format", "openai", "--json")
    assert plain.returncode == 0, plain.stderr
    converted = cli("convert", root, "z", "--to", "none")
    assert converted.returncode == 0, converted.stderr
    assert converted.stdout.startswith("z: session.jsonl.zstd -> session.jsonl (")
    assert cli("ls", root, "--json").stdout.count('"compression":"none"') == 1
    assert cli("export", root, "z", "--format", "openai", "--json").stdout == plain.stdout
    assert cli("convert", root, "nosuch", "--to", "zstd").returncode == 3
    crashed = cli(
        "demo", "--root", root, "--session-id", "c", "--compression", "zstd", "--no-recover"
    )
    assert crashed.returncode == 0, crashed.stderr
    assert cli("verify", root, "c").returncode == 1
    assert cli("show", root, "c", "--json").stdout.startswith('{"type":"session","version":0,')
    recovered = cli("recover", root, "c")
    assert recovered.stdout.startswith("c: repaired (interrupted): 3 closer(s) appended")
    assert cli("verify", root, "c").returncode == 0
    assert (tmp_path / "store" / "_no-cwd" / "c" / "session.jsonl.zstd").exists()
