"""The mapping of channel values to the wire: LangChain messages in the
messages channel go as loom messages and come back exactly; everything
that could not come back exactly goes as a serializer blob."""

from __future__ import annotations

import datetime
import json
import uuid
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import ToolCall
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from loomthreads import Client
from loomthreads._values import MessageCodec, decode, encode
from loomthreads.langgraph import LoomSaver
from tests.servers import LoomServer

SERDE = JsonPlusSerializer()


def every_kind() -> list[BaseMessage]:
    """A message of each kind LangChain stores, with the fields that make
    an exact round trip hard."""
    return [
        SystemMessage("You are terse.", id="m-system"),
        HumanMessage(
            [{"type": "text", "text": "Look: é, 漢字, 🙂"}, {"type": "image_url", "image_url": {"url": "data:,x"}}],
            id="m-human",
            name="ada",
            additional_kwargs={"nested": {"list": [1, 2.5, None, True]}},
        ),
        AIMessage(
            "",
            id="m-ai",
            tool_calls=[ToolCall(name="lookup", args={"q": "x", "n": 3}, id="call_1")],
            usage_metadata={"input_tokens": 10, "output_tokens": 3, "total_tokens": 13},
            response_metadata={"model_name": "fake", "finish_reason": "tool_calls"},
        ),
        ToolMessage("result", tool_call_id="call_1", id="m-tool", name="lookup", status="error", artifact={"rows": [1]}),
        ChatMessage(content="hi", role="critic", id="m-chat"),
        FunctionMessage(content="42", name="f", id="m-function"),
        RemoveMessage(id="m-old"),
        AIMessageChunk(content="partial", id="m-chunk"),
        AIMessage("", id="m-invalid", invalid_tool_calls=[{"name": "x", "args": "{bad", "id": "c", "error": "json", "type": "invalid_tool_call"}]),
    ]


def _same(a: Any, b: Any) -> None:
    assert type(a) is type(b)
    assert a == b
    if isinstance(a, list):
        for x, y in zip(a, b, strict=True):
            assert type(x) is type(y) and x == y
            assert x.model_dump() == y.model_dump()


def test_messages_go_as_messages_and_come_back_exactly() -> None:
    msgs = every_kind()
    wire = encode(SERDE, "messages", msgs)
    assert "messages" in wire and "blob" not in wire
    assert [m["data"]["id"] for m in wire["messages"]] == [m.id for m in msgs]
    # The server keeps the stored form as JSON: what comes back is JSON-equal.
    back = decode(SERDE, json.loads(json.dumps(wire)))
    _same(back, msgs)


class Custom(HumanMessage):
    """A user's own message class: message_to_dict would give it back as a
    HumanMessage, so it must go as a blob."""


@pytest.mark.parametrize(
    "value",
    [
        pytest.param([], id="empty list"),
        pytest.param([HumanMessage("no id")], id="without id"),
        pytest.param([HumanMessage("empty id", id="")], id="empty id"),
        pytest.param(HumanMessage("one", id="m1"), id="one message, not a list"),
        pytest.param((HumanMessage("t", id="m1"),), id="tuple"),
        pytest.param([HumanMessage("a", id="m1"), "text"], id="not all messages"),
        pytest.param([Custom(content="c", id="m1")], id="custom class"),
        pytest.param([HumanMessage("t", id="m1", additional_kwargs={"k": (1, 2)})], id="tuple inside"),
        pytest.param([HumanMessage("t", id="m1", additional_kwargs={"at": datetime.date(2026, 1, 2)})], id="date inside"),
        pytest.param([HumanMessage("t", id="m1", additional_kwargs={"x": float("nan")})], id="nan inside"),
        pytest.param([HumanMessage("t", id="m1", additional_kwargs={1: "int key"})], id="int key inside"),
        pytest.param([ToolMessage("r", tool_call_id="c", id="m1", artifact=b"bytes")], id="bytes artifact"),
        pytest.param({"messages": []}, id="a dict"),
    ],
)
def test_what_cannot_round_trip_goes_as_a_blob(value: Any) -> None:
    wire = encode(SERDE, "messages", value)
    assert "blob" in wire and "messages" not in wire
    # Exactly what the serializer gives back.
    back = decode(SERDE, json.loads(json.dumps(wire)))
    expected = SERDE.loads_typed(SERDE.dumps_typed(value))
    assert type(back) is type(expected) and repr(back) == repr(expected)


def test_other_channels_go_as_blobs() -> None:
    msgs = [HumanMessage("hi", id="m1")]
    wire = encode(SERDE, "history", msgs)
    assert "blob" in wire
    _same(decode(SERDE, wire), msgs)


def test_messages_round_trip_through_loom(sqlite_server: LoomServer) -> None:
    """Through a real put and get: loom gives back the stored form, and the
    saver the same message objects."""
    tid = f"values-{uuid.uuid4()}"
    msgs = every_kind()
    with LoomSaver(url=sqlite_server.url) as saver, Client(sqlite_server.url) as client:
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": msgs, "n": 7}
        cp["channel_versions"] = {"messages": 1, "n": 1}
        cfg = saver.put({"configurable": {"thread_id": tid, "checkpoint_ns": ""}}, cp, {"source": "input", "step": -1}, {"messages": 1, "n": 1})
        raw = client.get_checkpoint({"thread_id": tid})
        assert raw is not None
        assert "messages" in raw["checkpoint"]["channel_values"]["messages"]
        tup = saver.get_tuple(cfg)
        assert tup is not None
        _same(tup.checkpoint["channel_values"]["messages"], msgs)
        assert tup.checkpoint["channel_values"]["n"] == 7

        # A write of a messages list also goes as messages.
        saver.put_writes(cfg, [("messages", msgs[:2]), ("messages", msgs[0])], "task-1")
        raw = client.get_checkpoint({"thread_id": tid})
        assert raw is not None
        kinds = [sorted(w["value"]) for w in raw["pending_writes"]]
        assert kinds == [["messages"], ["blob"]]
        tup = saver.get_tuple(cfg)
        assert tup is not None and tup.pending_writes is not None
        _same(tup.pending_writes[0][2], msgs[:2])
        assert tup.pending_writes[1][2] == msgs[0]


def test_codec_remembers_messages_but_sees_fields_set_anew() -> None:
    codec = MessageCodec()
    msgs = every_kind()
    first = codec.stored(msgs)
    assert first is not None
    again = codec.stored(msgs)
    assert again is not None and all(a is b for a, b in zip(first, again))  # from memory
    msgs[1].content = "edited"  # a field set anew
    msgs[3] = ToolMessage("replaced", tool_call_id="call_1", id="m-tool")  # same id, new object
    msgs[2].additional_kwargs = {"k": (1, 2)}  # no longer plain JSON
    assert codec.stored(msgs) is None
    msgs[2].additional_kwargs = {}
    third = codec.stored(msgs)
    assert third is not None
    contents = [dict(m["data"]).get("content") for m in third]
    assert contents[1] == "edited" and contents[3] == "replaced"
    assert third[0] is first[0]
    _same(decode(SERDE, {"messages": third}), msgs)


def test_codec_forgets_beyond_its_size() -> None:
    codec = MessageCodec(size=2)
    msgs = [HumanMessage(str(i), id=f"m{i}") for i in range(5)]
    assert codec.stored(msgs) is not None
    assert len(codec._memo) == 2
