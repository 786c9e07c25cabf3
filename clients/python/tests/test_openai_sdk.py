"""The official `openai` SDK (sync and async) against a real `loom serve
--provider scripted` on SQLite, through loom's OpenAI-compatible API at
/openai/v1: conversations and their items, responses in a conversation and
by previous_response_id (an earlier one continued is a loom fork), function
calls, errors, keys and tenants — each checked through the SDK and, where
loom keeps something of its own (versions, forks), through loom's native
API. The scripted model answers "You said: <last user text>", calls a tool
offered when the user writes `call <tool> <json>`, and answers a tool's
output with "Tool <name> returned: <output>"."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import httpx2
import openai
import pytest
from openai import OpenAI
from openai.types.responses import FunctionToolParam, ResponseInputItemParam

from tests.conftest import ROOT
from tests.oai import (
    async_client,
    base_url,
    describe,
    get_json,
    messages,
    native,
    sync_client,
    thread_of,
)
from tests.servers import LoomServer

ID_CHARS = "[0-9a-hjkmnp-tv-z]{26}"

ADD_TOOL: FunctionToolParam = {
    "type": "function",
    "name": "add",
    "description": "Adds two integers.",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    "strict": True,
}


@pytest.fixture(scope="module")
def client(scripted_server: LoomServer) -> Iterator[OpenAI]:
    with sync_client(scripted_server) as c:
        yield c


@pytest.fixture(scope="module")
def loom(scripted_server: LoomServer) -> Iterator[httpx.Client]:
    with native(scripted_server) as c:
        yield c


def user(text: str) -> ResponseInputItemParam:
    return {"role": "user", "content": text}


# --- conversations -----------------------------------------------------------


def test_conversation_create_retrieve_update_delete(client: OpenAI, loom: httpx.Client) -> None:
    before = int(time.time())
    conv = client.conversations.create(
        items=[
            {"role": "user", "content": "Plan a trip to Lyon"},
            cast(Any, {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sure."}]}),
        ],
        metadata={"topic": "travel", "owner": "ana"},
    )
    assert re.fullmatch(f"conv_{ID_CHARS}", conv.id), conv.id
    assert conv.object == "conversation"
    assert before - 1 <= conv.created_at <= int(time.time()) + 1
    assert conv.metadata == {"topic": "travel", "owner": "ana"}

    got = client.conversations.retrieve(conv.id)
    assert (got.id, got.created_at, got.metadata) == (conv.id, conv.created_at, conv.metadata)
    items = list(client.conversations.items.list(conv.id, order="asc"))
    assert [describe(i) for i in items] == [("user", "Plan a trip to Lyon"), ("assistant", "Sure.")]

    # The conversation is a loom thread of the same id, labelled and titled
    # from its first user text.
    th = get_json(loom, f"/v1/threads/{conv.id}")
    assert th["labels"].get("openai") == "conversation"
    assert th["title"] == "Plan a trip to Lyon"
    assert messages(loom, conv.id) == [("user", "Plan a trip to Lyon"), ("assistant", "Sure.")]

    updated = client.conversations.update(conv.id, metadata={"topic": "work"})
    assert updated.metadata == {"topic": "work"}  # replaced, not merged
    assert client.conversations.retrieve(conv.id).metadata == {"topic": "work"}

    deleted = client.conversations.delete(conv.id)
    assert (deleted.id, deleted.object, deleted.deleted) == (conv.id, "conversation.deleted", True)
    with pytest.raises(openai.NotFoundError):
        client.conversations.retrieve(conv.id)
    assert loom.get(f"/v1/threads/{conv.id}").status_code == 404


def test_empty_conversation_has_empty_metadata(client: OpenAI) -> None:
    conv = client.conversations.create()
    assert conv.metadata == {}
    page = client.conversations.items.list(conv.id)
    assert (page.data, page.has_more) == ([], False)


def test_items_batch_retrieve_delete_keeps_history(client: OpenAI, loom: httpx.Client) -> None:
    conv = client.conversations.create(items=[user("first")])
    created = client.conversations.items.create(
        conv.id,
        items=[
            user("second"),
            {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": '{"q": "x"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "found"},
            {
                "type": "reasoning",
                "id": "rs_given_by_client",
                "summary": [{"type": "summary_text", "text": "thinking about x"}],
            },
        ],
        include=["message.output_text.logprobs"],
    )
    assert created.object == "list"
    assert [describe(i) for i in created.data] == [
        ("user", "second"),
        ("function_call", "lookup", '{"q": "x"}'),
        ("function_call_output", "found"),
        ("reasoning",),
    ]
    ids = [i.id or "" for i in created.data]
    assert re.fullmatch(f"msg_{ID_CHARS}", ids[0] or "")
    assert re.fullmatch(f"fc_{ID_CHARS}", ids[1] or "")
    assert re.fullmatch(f"fco_{ID_CHARS}", ids[2] or "")
    assert ids[3] == "rs_given_by_client"  # an id the client gave is kept
    assert (created.first_id, created.last_id, created.has_more) == (ids[0], ids[-1], False)

    listed = list(client.conversations.items.list(conv.id))  # default order: newest first
    assert [i.id for i in listed][:4] == ids[::-1]
    assert describe(listed[-1]) == ("user", "first")

    fc = client.conversations.items.retrieve(ids[1], conversation_id=conv.id)
    assert fc.type == "function_call"
    assert (fc.call_id, fc.name, fc.arguments, fc.status) == ("call_1", "lookup", '{"q": "x"}', "completed")
    rs = client.conversations.items.retrieve("rs_given_by_client", conversation_id=conv.id)
    assert rs.type == "reasoning" and [s.text for s in rs.summary] == ["thinking about x"]

    version_before = get_json(loom, f"/v1/threads/{conv.id}")["version"]
    after_delete = client.conversations.items.delete(ids[1], conversation_id=conv.id)
    assert (after_delete.id, after_delete.object) == (conv.id, "conversation")  # OpenAI answers the conversation
    assert ids[1] not in [i.id for i in client.conversations.items.list(conv.id)]
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.retrieve(ids[1], conversation_id=conv.id)

    # Deleting an item is a new version of the thread: the old one is still
    # in its history and still reads with the item.
    th = get_json(loom, f"/v1/threads/{conv.id}")
    assert th["version"] == version_before + 1
    history = get_json(loom, f"/v1/threads/{conv.id}/history")["entries"]
    assert [e["version"] for e in history][:2] == [version_before + 1, version_before]
    old = messages(loom, conv.id, version=version_before)
    assert ("assistant", 'call lookup {"q": "x"}') in old
    assert ("assistant", 'call lookup {"q": "x"}') not in messages(loom, conv.id)


def test_item_kept_as_it_came(client: OpenAI, scripted_server: LoomServer) -> None:
    """An item type loom has no content for (here a web search call) and
    an assistant message with annotations are stored whole and read back
    as they were sent."""
    web: dict[str, Any] = {
        "type": "web_search_call",
        "id": "ws_from_elsewhere",
        "status": "completed",
        "action": {"type": "search", "query": "loom threads"},
    }
    annotated: dict[str, Any] = {
        "type": "message",
        "id": "msg_annotated",
        "role": "assistant",
        "status": "completed",
        "content": [
            {
                "type": "output_text",
                "text": "See the docs.",
                "annotations": [{"type": "url_citation", "url": "https://example.com", "title": "Docs",
                                 "start_index": 4, "end_index": 12}],
                "logprobs": [],
            }
        ],
    }
    conv = client.conversations.create(items=cast(Any, [web, annotated]))
    with httpx.Client(base_url=base_url(scripted_server), timeout=30) as raw:
        for item in (web, annotated):
            r = raw.get(f"/conversations/{conv.id}/items/{item['id']}")
            assert r.status_code == 200, r.text
            assert r.json() == item


def test_items_paginate_over_250_in_both_orders(scripted_server: LoomServer) -> None:
    requests: list[str] = []

    def count(req: httpx2.Request) -> None:
        if req.method == "GET":
            requests.append(str(req.url))

    with OpenAI(
        base_url=base_url(scripted_server),
        api_key="loom",
        max_retries=0,
        http_client=httpx2.Client(event_hooks={"request": [count]}),
    ) as client:
        conv = client.conversations.create()
        ids: list[str] = []
        for start in range(0, 250, 50):
            batch: list[ResponseInputItemParam] = [
                {"role": "user" if n % 2 == 0 else "assistant", "content": f"item {n}"}
                for n in range(start, start + 50)
            ]
            got = client.conversations.items.create(conv.id, items=batch)
            ids += [i.id for i in got.data if i.id]
        assert len(ids) == len(set(ids)) == 250

        requests.clear()
        asc = list(client.conversations.items.list(conv.id, order="asc", limit=100))
        assert [i.id for i in asc] == ids
        assert [describe(i)[1] for i in asc] == [f"item {n}" for n in range(250)]
        assert len(requests) == 3  # 100 + 100 + 50: has_more is false on the last page

        requests.clear()
        desc = list(client.conversations.items.list(conv.id, order="desc", limit=100))
        assert [i.id for i in desc] == ids[::-1]
        assert len(requests) == 3

        # The default page (20, newest first) walks the whole list too.
        requests.clear()
        assert [i.id for i in client.conversations.items.list(conv.id)] == ids[::-1]
        assert len(requests) == 13

        page = client.conversations.items.list(conv.id, order="asc", limit=100, after=ids[99])
        assert [i.id for i in page.data] == ids[100:200]
        assert (page.last_id, page.has_more) == (ids[199], True)
        last = client.conversations.items.list(conv.id, order="asc", limit=100, after=ids[199])
        assert [i.id for i in last.data] == ids[200:]
        assert last.has_more is False
        after_desc = list(client.conversations.items.list(conv.id, order="desc", limit=7, after=ids[150]))
        assert [i.id for i in after_desc] == ids[149::-1]
        assert list(client.conversations.items.list(conv.id, order="asc", after=ids[-1])) == []


def test_native_thread_is_a_conversation(client: OpenAI, loom: httpx.Client) -> None:
    """A thread made by loom's own API is a conversation at once: a message
    of several contents reads as several items (the k-th named <id>.k), and
    a response appends to it."""
    r = loom.post(
        "/v1/threads",
        json={
            "title": "made natively",
            "messages": [
                {"id": "m1", "role": "user", "contents": [{"type": "text", "text": "weather?"}]},
                {
                    "id": "m2",
                    "role": "assistant",
                    "contents": [
                        {"type": "text", "text": "Checking."},
                        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"city": "Paris"}'},
                        {"type": "function_call", "call_id": "c2", "name": "weather", "arguments": '{"city": "Rome"}'},
                    ],
                },
                {
                    "id": "m3",
                    "role": "tool",
                    "contents": [
                        {"type": "function_result", "call_id": "c1", "result": "sunny"},
                        {"type": "function_result", "call_id": "c2", "result": "rain"},
                    ],
                },
            ],
        },
    )
    assert r.status_code == 201, r.text
    tid = r.json()["id"]
    items = list(client.conversations.items.list(tid, order="asc"))
    assert [(i.id, *describe(i)) for i in items] == [
        ("m1", "user", "weather?"),
        ("m2", "assistant", "Checking."),
        ("m2.1", "function_call", "weather", '{"city": "Paris"}'),
        ("m2.2", "function_call", "weather", '{"city": "Rome"}'),
        ("m3", "function_call_output", "sunny"),
        ("m3.1", "function_call_output", "rain"),
    ]
    assert describe(client.conversations.items.retrieve("m2.2", conversation_id=tid)) == (
        "function_call",
        "weather",
        '{"city": "Rome"}',
    )
    resp = client.responses.create(model="loom", input="thanks", conversation=tid)
    assert resp.output_text == "You said: thanks"
    assert messages(loom, tid)[-2:] == [("user", "thanks"), ("assistant", "You said: thanks")]


def test_native_rollback_and_fork_seen_by_the_sdk(client: OpenAI, loom: httpx.Client) -> None:
    """Time travel in loom is what the SDK then sees: a conversation rolled
    back natively lists the earlier items and goes on from there; a fork is
    a conversation of its own with the same items."""
    conv = client.conversations.create()
    client.responses.create(model="loom", input="one", conversation=conv.id)
    version = get_json(loom, f"/v1/threads/{conv.id}")["version"]
    client.responses.create(model="loom", input="two", conversation=conv.id)
    fork = loom.post(f"/v1/threads/{conv.id}/fork", json={}).json()["id"]
    r = loom.post(f"/v1/threads/{conv.id}/rollback", json={"version": version})
    assert r.status_code == 200, r.text
    assert [describe(i)[1] for i in client.conversations.items.list(conv.id, order="asc")] == ["one", "You said: one"]
    client.responses.create(model="loom", input="three", conversation=conv.id)
    assert [describe(i)[1] for i in client.conversations.items.list(conv.id, order="asc")] == [
        "one",
        "You said: one",
        "three",
        "You said: three",
    ]
    assert [describe(i)[1] for i in client.conversations.items.list(fork, order="asc")] == [
        "one",
        "You said: one",
        "two",
        "You said: two",
    ]
    assert client.conversations.retrieve(fork).id == fork


def test_service_thread_is_read_only(client: OpenAI, loom: httpx.Client) -> None:
    """A service-managed thread mirrors a conversation kept by a service:
    it reads, but the compatible API does not write to it."""
    r = loom.post("/v1/threads", json={"kind": "service", "title": "kept elsewhere"})
    assert r.status_code == 201, r.text
    tid = r.json()["id"]
    assert client.conversations.retrieve(tid).id == tid
    assert list(client.conversations.items.list(tid)) == []
    with pytest.raises(openai.BadRequestError) as e:
        client.conversations.items.create(tid, items=[user("write")])
    error_of(e)
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="loom", input="write", conversation=tid)
    assert messages(loom, tid) == []


# --- responses ---------------------------------------------------------------


def test_response_in_conversation(client: OpenAI, loom: httpx.Client) -> None:
    conv = client.conversations.create(metadata={"via": "responses"})
    resp = client.responses.create(model="loom", input="Hello!", conversation=conv.id)
    assert resp.output_text == "You said: Hello!"
    assert re.fullmatch(f"resp_{ID_CHARS}_{conv.id}", resp.id), resp.id
    assert (resp.object, resp.status, resp.model) == ("response", "completed", "loom")
    assert resp.conversation is not None and resp.conversation.id == conv.id
    assert resp.error is None and resp.usage is not None
    out = resp.output[0]
    assert out.type == "message" and re.fullmatch(f"msg_{ID_CHARS}", out.id)

    items = list(client.conversations.items.list(conv.id, order="asc"))
    assert [describe(i) for i in items] == [("user", "Hello!"), ("assistant", "You said: Hello!")]
    assert items[1].id == out.id  # the output item is the conversation's item
    assert messages(loom, conv.id) == [("user", "Hello!"), ("assistant", "You said: Hello!")]

    # The next response in the conversation sees it and appends to it.
    again = client.responses.create(model="loom", input=[user("And again")], conversation={"id": conv.id})
    assert again.output_text == "You said: And again"
    assert len(list(client.conversations.items.list(conv.id))) == 4


def test_streamed_response_in_conversation(client: OpenAI) -> None:
    conv = client.conversations.create(items=[user("earlier")])
    types: list[str] = []
    sequence: list[int] = []
    deltas: list[str] = []
    with client.responses.stream(model="loom", input="Stream this reply please", conversation=conv.id) as stream:
        for event in stream:
            types.append(event.type)
            sequence.append(event.sequence_number)
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert final.output_text == "You said: Stream this reply please"
    assert "".join(deltas) == final.output_text
    assert len(deltas) > 1  # the scripted model streams in pieces
    assert sequence == list(range(len(sequence)))
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    for t in ("response.output_item.added", "response.content_part.added", "response.output_text.done",
              "response.content_part.done", "response.output_item.done"):
        assert t in types, t
    assert thread_of(final.id) == conv.id

    items = list(client.conversations.items.list(conv.id, order="asc"))
    assert [describe(i) for i in items] == [
        ("user", "earlier"),
        ("user", "Stream this reply please"),
        ("assistant", "You said: Stream this reply please"),
    ]
    # Answered is durable: the stored response is the one streamed.
    stored = client.responses.retrieve(final.id)
    assert stored.output_text == final.output_text
    assert stored.output[0].model_dump().get("id") == final.output[0].model_dump().get("id")


async def test_async_client_conversations_and_raw_stream(scripted_server: LoomServer) -> None:
    async with async_client(scripted_server) as client:
        conv = await client.conversations.create(items=[user("async hello")], metadata={"k": "v"})
        assert (await client.conversations.retrieve(conv.id)).metadata == {"k": "v"}
        added = await client.conversations.items.create(conv.id, items=[user("one"), user("two")])
        assert [describe(i) for i in added.data] == [("user", "one"), ("user", "two")]
        listed = [i async for i in client.conversations.items.list(conv.id, order="asc", limit=2)]
        assert [describe(i)[1] for i in listed] == ["async hello", "one", "two"]
        got = await client.conversations.items.retrieve(added.data[0].id or "", conversation_id=conv.id)
        assert describe(got) == ("user", "one")
        await client.conversations.items.delete(added.data[0].id or "", conversation_id=conv.id)

        stream = await client.responses.create(model="loom", input="async stream", conversation=conv.id, stream=True)
        events = [e async for e in stream]
        assert events[0].type == "response.created" and events[-1].type == "response.completed"
        done = events[-1]
        assert done.type == "response.completed"
        assert done.response.output_text == "You said: async stream"
        assert {e.response.id for e in events if e.type in ("response.created", "response.completed")} == {
            done.response.id
        }
        listed = [i async for i in client.conversations.items.list(conv.id, order="asc")]
        assert [describe(i)[1] for i in listed] == ["async hello", "two", "async stream", "You said: async stream"]

        deleted = await client.conversations.delete(conv.id)
        assert deleted.deleted
        with pytest.raises(openai.NotFoundError):
            await client.conversations.items.list(conv.id)


async def test_concurrent_writers_lose_nothing(scripted_server: LoomServer) -> None:
    """Appends to one conversation from many requests at once (items and
    responses) all land: a conversation write is a pure append, retried by
    loom on a moved head, never a 409 for the SDK to retry."""
    async with async_client(scripted_server) as client:
        conv = await client.conversations.create()
        results = await asyncio.gather(
            *(client.conversations.items.create(conv.id, items=[user(f"item {n}")]) for n in range(12)),
            *(client.responses.create(model="loom", input=f"ask {n}", conversation=conv.id) for n in range(4)),
        )
        assert len(results) == 16
        said = [describe(i)[1] async for i in client.conversations.items.list(conv.id, order="asc", limit=100)]
        assert sorted(t for t in said if t.startswith("item ")) == sorted(f"item {n}" for n in range(12))
        for n in range(4):
            # Each response's input and output are adjacent: one commit.
            at = said.index(f"ask {n}")
            assert said[at + 1] == f"You said: ask {n}"
        assert len(said) == 20


def test_function_call_round_trip_in_conversation(client: OpenAI, loom: httpx.Client) -> None:
    conv = client.conversations.create()
    first = client.responses.create(
        model="loom", input='call add {"a": 2, "b": 3}', conversation=conv.id, tools=[ADD_TOOL]
    )
    assert len(first.output) == 1
    call = first.output[0]
    assert call.type == "function_call"
    assert call.name == "add" and json.loads(call.arguments) == {"a": 2, "b": 3}
    assert call.call_id.startswith("call_") and (call.id or "").startswith("fc_")
    assert first.output_text == ""
    assert [t.type for t in first.tools] == ["function"]

    second = client.responses.create(
        model="loom",
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "5"}],
        conversation=conv.id,
        tools=[ADD_TOOL],
    )
    assert second.output_text == "Tool add returned: 5"
    items = list(client.conversations.items.list(conv.id, order="asc"))
    assert [describe(i) for i in items] == [
        ("user", 'call add {"a": 2, "b": 3}'),
        ("function_call", "add", '{"a": 2, "b": 3}'),
        ("function_call_output", "5"),
        ("assistant", "Tool add returned: 5"),
    ]
    assert messages(loom, conv.id) == [
        ("user", 'call add {"a": 2, "b": 3}'),
        ("assistant", 'call add {"a": 2, "b": 3}'),
        ("tool", "result 5"),
        ("assistant", "Tool add returned: 5"),
    ]
    # Without the tool offered, the same text is just text.
    plain = client.responses.create(model="loom", input='call add {"a": 1}', conversation=conv.id)
    assert plain.output_text == 'You said: call add {"a": 1}'


def test_streamed_function_call(client: OpenAI) -> None:
    with client.responses.stream(model="loom", input='call add {"a": 9, "b": 1}', tools=[ADD_TOOL]) as stream:
        events = [e.type for e in stream]
        final = stream.get_final_response()
    assert "response.function_call_arguments.delta" in events
    assert "response.function_call_arguments.done" in events
    call = final.output[0]
    assert call.type == "function_call" and call.name == "add"
    assert call.parsed_arguments == {"a": 9, "b": 1}  # the SDK parses a strict tool's arguments
    with client.responses.stream(
        model="loom",
        previous_response_id=final.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "10"}],
        tools=[ADD_TOOL],
    ) as stream:
        assert stream.get_final_response().output_text == "Tool add returned: 10"


def test_function_call_round_trip_by_previous_response(client: OpenAI) -> None:
    first = client.responses.create(model="loom", input='call add {"a": 40, "b": 2}', tools=[ADD_TOOL])
    call = first.output[0]
    assert call.type == "function_call"
    second = client.responses.create(
        model="loom",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "42"}],
        tools=[ADD_TOOL],
    )
    assert second.output_text == "Tool add returned: 42"
    assert second.previous_response_id == first.id


def test_previous_response_id_branches_from_an_earlier_response(client: OpenAI, loom: httpx.Client) -> None:
    r1 = client.responses.create(model="loom", input="one", instructions="Be brief.")
    trunk = thread_of(r1.id)
    th = get_json(loom, f"/v1/threads/{trunk}")
    assert th["labels"].get("openai") == "responses" and th["title"] == "one"

    r2 = client.responses.create(model="loom", input="two", previous_response_id=r1.id)
    assert thread_of(r2.id) == trunk  # r1 was the head: a plain append
    # r1 again: the thread has moved on, so this is a branch — a loom fork.
    r3 = client.responses.create(model="loom", input="three", previous_response_id=r1.id)
    branch = thread_of(r3.id)
    assert branch != trunk
    # Both lines go on.
    r4 = client.responses.create(model="loom", input="four", previous_response_id=r2.id)
    r5 = client.responses.create(model="loom", input="five", previous_response_id=r3.id)
    assert (thread_of(r4.id), thread_of(r5.id)) == (trunk, branch)
    for r, text in ((r2, "two"), (r3, "three"), (r4, "four"), (r5, "five")):
        assert r.output_text == f"You said: {text}"

    said = [m[1] for m in messages(loom, trunk)]
    assert said == ["one", "You said: one", "two", "You said: two", "four", "You said: four"]
    said = [m[1] for m in messages(loom, branch)]
    assert said == ["one", "You said: one", "three", "You said: three", "five", "You said: five"]

    fork = get_json(loom, f"/v1/threads/{branch}")
    assert fork["forked_from"]["thread"] == trunk
    family = get_json(loom, f"/v1/threads/{trunk}/family")
    assert family["root"] == trunk
    assert {t["id"] for t in family["threads"]} >= {trunk, branch}

    # Every response is still there, with its own input.
    assert client.responses.retrieve(r1.id, include=["message.output_text.logprobs"]).output_text == "You said: one"
    assert [describe(i) for i in client.responses.input_items.list(r3.id)] == [("user", "three")]
    # instructions are not carried over to the next response (as OpenAI).
    assert client.responses.retrieve(r1.id).instructions == "Be brief."
    assert r2.instructions is None


def test_get_and_delete_response_and_input_items(client: OpenAI) -> None:
    resp = client.responses.create(
        model="loom",
        input=[user("context"), {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        metadata={"run": "7"},
    )
    got = client.responses.retrieve(resp.id)
    assert (got.id, got.output_text, got.metadata) == (resp.id, "You said: hi", {"run": "7"})
    assert [o.model_dump().get("id") for o in got.output] == [o.model_dump().get("id") for o in resp.output]

    inputs = list(client.responses.input_items.list(resp.id))  # newest first by default
    assert [describe(i) for i in inputs] == [("user", "hi"), ("user", "context")]
    inputs = list(client.responses.input_items.list(resp.id, order="asc", limit=1))
    assert [describe(i) for i in inputs] == [("user", "context"), ("user", "hi")]

    with pytest.raises(openai.BadRequestError):
        client.responses.cancel(resp.id)  # loom runs no background responses

    # The SDK's delete returns nothing; the answer is checked raw.
    deleted = client.responses.with_raw_response.delete(resp.id).http_response.json()
    assert deleted == {"id": resp.id, "object": "response.deleted", "deleted": True}
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(resp.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="loom", input="more", previous_response_id=resp.id)


def test_unstored_response_is_not_kept(client: OpenAI) -> None:
    resp = client.responses.create(model="loom", input="forget me", store=False)
    assert resp.output_text == "You said: forget me"
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(resp.id)
    # With a conversation the items are still appended to it, as OpenAI does.
    conv = client.conversations.create()
    client.responses.create(model="loom", input="keep the items", store=False, conversation=conv.id)
    assert [describe(i)[1] for i in client.conversations.items.list(conv.id, order="asc")] == [
        "keep the items",
        "You said: keep the items",
    ]


# --- errors ------------------------------------------------------------------


def test_unknown_conversation_is_not_found(client: OpenAI) -> None:
    for call in (
        lambda: client.conversations.retrieve("conv_doesnotexist"),
        lambda: client.conversations.items.list("conv_doesnotexist"),
        lambda: client.conversations.items.create("conv_doesnotexist", items=[user("x")]),
        lambda: client.responses.create(model="loom", input="x", conversation="conv_doesnotexist"),
    ):
        with pytest.raises(openai.NotFoundError) as e:
            call()
        assert e.value.status_code == 404
        assert "conv_doesnotexist" in e.value.message
        assert isinstance(e.value.body, dict) and {"message", "type", "param", "code"} <= e.value.body.keys()
    conv = client.conversations.create()
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.retrieve("msg_nothere", conversation_id=conv.id)


def error_of(e: pytest.ExceptionInfo[openai.BadRequestError]) -> dict[str, Any]:
    body = e.value.body
    assert isinstance(body, dict), body
    assert body["type"] == "invalid_request_error"
    assert isinstance(body["message"], str) and body["message"]
    assert "param" in body
    return cast(dict[str, Any], body)


def test_bad_items_are_refused_and_change_nothing(client: OpenAI, loom: httpx.Client) -> None:
    conv = client.conversations.create(items=[user("keep me")])
    version = get_json(loom, f"/v1/threads/{conv.id}")["version"]
    bad = [
        user("fine"),
        cast(Any, {"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "ftp://x/y.png"}]}),
    ]
    with pytest.raises(openai.BadRequestError) as e:
        client.conversations.items.create(conv.id, items=bad)
    assert error_of(e)["param"] == "items[1].content[0].image_url"
    with pytest.raises(openai.BadRequestError) as e:
        client.conversations.items.create(conv.id, items=[cast(Any, {"role": "user"})])
    error_of(e)
    with pytest.raises(openai.BadRequestError) as e:
        client.conversations.items.create(conv.id, items=[])
    error_of(e)
    with pytest.raises(openai.BadRequestError) as e:
        client.conversations.items.create(conv.id, items=[cast(Any, {"id": "bad id!", "role": "user", "content": "x"})])
    error_of(e)
    with pytest.raises(openai.BadRequestError) as e:
        client.conversations.items.list(conv.id, limit=101)
    assert error_of(e)["param"] == "limit"
    with pytest.raises(openai.BadRequestError) as e:
        client.conversations.items.list(conv.id, order=cast(Any, "sideways"))
    assert error_of(e)["param"] == "order"
    with pytest.raises(openai.BadRequestError) as e:
        client.conversations.update(conv.id, metadata=cast(Any, {"k": 1}))
    error_of(e)
    # Nothing of the refused requests was written.
    assert get_json(loom, f"/v1/threads/{conv.id}")["version"] == version
    assert [describe(i) for i in client.conversations.items.list(conv.id)] == [("user", "keep me")]


def test_unsupported_features_say_loom_does_not_support_them(client: OpenAI, loom: httpx.Client) -> None:
    conv = client.conversations.create()
    version = get_json(loom, f"/v1/threads/{conv.id}")["version"]
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="loom", input="search", conversation=conv.id, tools=[{"type": "web_search"}])
    body = error_of(e)
    assert "loom does not support" in body["message"] and "web_search" in body["message"]
    assert body["param"] == "tools[0].type"
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="loom", input="later", background=True)
    body = error_of(e)
    assert "loom does not support" in body["message"] and body["param"] == "background"
    r = client.responses.create(model="loom", input="first")
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="loom", input="both", conversation=conv.id, previous_response_id=r.id)
    error_of(e)
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="loom", input="x", extra_body={"no_such_field": 1})
    body = error_of(e)
    assert "no_such_field" in body["message"] and body["param"] == "no_such_field"
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="loom", input=[cast(Any, {"type": "item_reference", "id": "msg_x"})])
    assert error_of(e)["param"] == "input[0]"
    # The refused responses wrote nothing to the conversation.
    assert get_json(loom, f"/v1/threads/{conv.id}")["version"] == version
    assert list(client.conversations.items.list(conv.id)) == []


def test_unknown_route_is_openai_not_found(scripted_server: LoomServer) -> None:
    with httpx.Client(base_url=base_url(scripted_server), timeout=30) as raw:
        r = raw.get("/no/such/thing")
    assert r.status_code == 404
    assert r.json()["error"]["message"] == "Invalid URL (GET /openai/v1/no/such/thing)"


# --- keys and tenants --------------------------------------------------------

KEY_A = "tenant-a-key-0123456789abcdef"
KEY_B = "tenant-b-key-0123456789abcdef"


@pytest.fixture(scope="module")
def keyed_server(loom_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoomServer]:
    d = tmp_path_factory.mktemp("loom-openai-keys")
    keys = d / "keys"
    keys.write_text(f"alpha:{KEY_A}\nbeta:{KEY_B}\n")
    with LoomServer(loom_bin, f"sqlite://{d}/loom.db", "--provider", "scripted", "--keys", str(keys)) as srv:
        yield srv


def test_wrong_key_is_an_authentication_error(keyed_server: LoomServer) -> None:
    with sync_client(keyed_server, api_key="not-a-key") as client, pytest.raises(openai.AuthenticationError) as e:
        client.conversations.create()
    assert e.value.status_code == 401
    assert isinstance(e.value.body, dict) and e.value.body.get("code") == "invalid_api_key"


def test_tenants_are_isolated(keyed_server: LoomServer) -> None:
    with sync_client(keyed_server, KEY_A) as a, sync_client(keyed_server, KEY_B) as b:
        conv = a.conversations.create(items=[user("alpha's secret")])
        resp = a.responses.create(model="loom", input="alpha asks", conversation=conv.id)
        for call in (
            lambda: b.conversations.retrieve(conv.id),
            lambda: b.conversations.items.list(conv.id),
            lambda: b.conversations.items.create(conv.id, items=[user("intruder")]),
            lambda: b.conversations.delete(conv.id),
            lambda: b.responses.retrieve(resp.id),
            lambda: b.responses.create(model="loom", input="x", conversation=conv.id),
            lambda: b.responses.create(model="loom", input="x", previous_response_id=resp.id),
        ):
            with pytest.raises(openai.NotFoundError):
                call()
        assert [describe(i)[1] for i in a.conversations.items.list(conv.id, order="asc")] == [
            "alpha's secret",
            "alpha asks",
            "You said: alpha asks",
        ]
        # b's own conversations work as usual.
        mine = b.conversations.create()
        assert b.conversations.retrieve(mine.id).id == mine.id
    with native(keyed_server, KEY_B) as loom_b:
        assert loom_b.get(f"/v1/threads/{conv.id}").status_code == 404


# --- the README's example ----------------------------------------------------

README_BASE_URL = "http://127.0.0.1:8080/openai/v1"


def readme_python_example() -> str:
    """The ```python block of the README's "Use loom from the OpenAI SDKs"."""
    text = (Path(ROOT) / "README.md").read_text()
    section = text.split("## Use loom from the OpenAI SDKs", 1)
    assert len(section) == 2, "README.md has no 'Use loom from the OpenAI SDKs' section"
    body = re.split(r"\n## ", section[1], maxsplit=1)[0]
    m = re.search(r"```python\n(.*?)```", body, re.S)
    assert m, "no python block in the README's OpenAI section"
    return m.group(1)


def test_readme_example_runs(scripted_server: LoomServer) -> None:
    code = readme_python_example()
    assert len(code.strip().splitlines()) <= 5
    assert README_BASE_URL in code
    code = code.replace(README_BASE_URL, base_url(scripted_server))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "You said: Hello!\n"
