"""The log's messages in the GenAI conventions' shape (``agent_session.otel.genai_messages``):
any history converts to JSON with one part per block, in order, the arguments parsed when they
are JSON and kept as text when not."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_session.otel.genai_messages import input_messages, output_messages
from tests.sweeps import examples

_text = st.text(max_size=20)
_blocks = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, _text),
    st.builds(lambda t: {"type": "reasoning", "text": t}, _text),
    st.builds(
        lambda i, n, a: {"type": "tool-call", "id": i, "name": n, "arguments": a},
        _text,
        _text,
        st.one_of(
            _text, st.builds(json.dumps, st.dictionaries(_text, st.integers(-(2**63), 2**63 - 1)))
        ),
    ),
)
_message = st.builds(
    lambda role, blocks: {"role": role, "content": blocks, "source": {"kind": "user"}, "id": "m"},
    st.sampled_from(["user", "assistant"]),
    st.lists(_blocks, max_size=4),
)
_result = st.builds(
    lambda i, t, e: {
        "role": "user",
        "source": {"kind": "tool", "callId": i},
        "id": "r",
        "content": [
            {"type": "tool-result", "toolCallId": i, "content": [{"type": "text", "text": t}]}
            | ({"isError": True} if e else {})
        ],
    },
    _text,
    _text,
    st.booleans(),
)


def _as_sent(text: str) -> Any:
    """Arguments as a span carries them: parsed where they are strict JSON whose integers fit
    64 bits and whose numbers are finite (JSON has no NaN or Infinity, which Python's parser
    takes, and ``1e400`` overflows), else the text."""

    def refuse(name: str) -> Any:
        raise ValueError(name)

    def fits(value: Any) -> bool:
        if isinstance(value, bool):
            return True
        if isinstance(value, int):
            return -(2**63) <= value < 2**64
        if isinstance(value, float):
            return math.isfinite(value)
        if isinstance(value, list):
            return all(fits(v) for v in value)
        if isinstance(value, dict):
            return all(fits(v) for v in value.values())
        return True

    try:
        parsed = json.loads(text, parse_constant=refuse)
    except ValueError:
        return text
    return parsed if fits(parsed) else text


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.one_of(_message, _result), max_size=6))
def test_every_history_converts_block_for_block(history: list[dict[str, Any]]) -> None:
    converted = json.loads(input_messages(history))
    assert len(converted) == len(history)
    for message, out in zip(history, converted, strict=True):
        tool = message["source"]["kind"] == "tool"
        assert out["role"] == ("tool" if tool else message["role"])
        assert len(out["parts"]) == len(message["content"])
        for block, part in zip(message["content"], out["parts"], strict=True):
            if block["type"] == "tool-call":
                assert part["type"] == "tool_call"
                assert part["arguments"] == _as_sent(block["arguments"])
            elif block["type"] == "tool-result":
                assert part["id"] == block["toolCallId"]
                assert part["response"] == block["content"][0]["text"]
                assert part.get("is_error", False) == block.get("isError", False)
            else:
                assert part == {"type": block["type"], "content": block["text"]}


def test_arguments_that_are_not_the_log_s_json_stay_text_and_the_finish_reason_is_kept() -> None:
    for text in ("NaN", "Infinity", '{"x": 1e400}', '{"n": 18446744073709551616}', '{"a": '):
        answer = {
            "role": "assistant",
            "source": {"kind": "model"},
            "id": "a",
            "content": [{"type": "tool-call", "id": "c", "name": "f", "arguments": text}],
        }
        (out,) = json.loads(output_messages(answer, "tool_call"))
        assert out == {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "c", "name": "f", "arguments": text}],
            "finish_reason": "tool_call",
        }
