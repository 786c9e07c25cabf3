"""The Microsoft Agent Framework (agent-framework-core) on loom: an Agent
whose sessions LoomHistoryProvider keeps in loom threads, with a fake chat
client (tests/af_fake.py, no network), against a real `loom serve` on
SQLite; and the service-managed mode, the framework's OpenAI Responses
client (agent-framework-openai) at loom's /openai/v1 of `loom serve
--provider scripted`."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_framework import AgentSession, Message
from agent_framework.openai import OpenAIChatClient

from loomthreads.agent_framework import LoomHistoryProvider, message_from_loom, message_to_loom
from tests.af_fake import PNG, add, agent
from tests.oai import async_client, base_url, get_json, messages, native, thread_of
from tests.servers import LoomServer

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def loom(sqlite_server: LoomServer) -> Iterator[httpx.Client]:
    with native(sqlite_server) as c:
        yield c


def texts(c: httpx.Client, thread_id: str) -> list[tuple[str, ...]]:
    return messages(c, thread_id)


def child(url: str, session: AgentSession, text: str, *, kill: bool = False) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "tests.af_fake", url, json.dumps(session.to_dict()), text]
    return subprocess.run(args + (["kill"] if kill else []), cwd=ROOT, capture_output=True, text=True, timeout=120)


THREE_TURNS = [
    ("user", "hello"),
    ("assistant", "You said: hello (1)"),
    ("user", "add 2 3"),
    ("assistant", 'call add {"a": 2, "b": 3}'),
    ("tool", "result 5"),
    ("assistant", "The sum is 5.", "data", "usage"),
    ("user", "bye"),
    ("assistant", "You said: bye (3)"),
]


async def three_turns(history: LoomHistoryProvider) -> AgentSession:
    a = agent(history)
    session = a.create_session()
    for text in ("hello", "add 2 3", "bye"):
        await a.run(text, session=session)
    return session


async def test_three_turns_with_a_tool(sqlite_server: LoomServer, loom: httpx.Client) -> None:
    history = LoomHistoryProvider(sqlite_server.url, title="adder")
    session = await three_turns(history)
    tid = history.thread_id(session)
    assert tid == session.session_id
    assert session.to_dict()["state"]["loom"] == {"thread_id": tid}
    assert texts(loom, tid) == THREE_TURNS
    assert get_json(loom, f"/v1/threads/{tid}")["title"] == "adder"
    # Read back, every message is the framework's own, content for content.
    back = await history.get_messages(session.session_id, state={"thread_id": tid})
    kinds = [[c.type for c in m.contents] for m in back]
    assert kinds == [["text"], ["text"], ["text"], ["function_call"], ["function_result"],
                     ["text", "data", "usage"], ["text"], ["text"]]
    image = back[5].contents[1]
    assert image.media_type == "image/png" and image.uri is not None and image.uri.startswith("data:image/png;base64,")
    assert back[5].contents[2].usage_details == {"input_token_count": 10, "output_token_count": 5,
                                                 "total_token_count": 15}
    await history.aclose()


def test_messages_round_trip_without_loss() -> None:
    from agent_framework import Content

    m = Message(
        role="assistant",
        author_name="adder",
        message_id="m1",
        contents=[
            Content.from_text("hi"),
            Content.from_text_reasoning(text="think"),
            Content.from_function_call(call_id="c1", name="add", arguments={"a": 1}),
            Content.from_function_result(call_id="c1", result={"sum": 1}),
            Content.from_data(data=PNG, media_type="image/png"),
            Content.from_uri(uri="https://example.com/a.png", media_type="image/png"),
            Content.from_usage(usage_details={"input_token_count": 1, "output_token_count": 2, "total_token_count": 3}),
            Content.from_hosted_file(file_id="file_1"),
        ],
        additional_properties={"k": [1, 2]},
    )
    wire = message_to_loom(m)
    assert [c["type"] for c in wire["contents"]] == [
        "text", "reasoning", "function_call", "function_result", "data", "data", "usage"]
    assert message_from_loom(json.loads(json.dumps(wire))).to_dict() == m.to_dict()
    # A message loom got elsewhere (no framework metadata) reads from loom's shape.
    plain = message_from_loom({"id": "msg_1", "role": "user", "contents": [{"type": "text", "text": "hey"}]})
    assert plain.role == "user" and plain.text == "hey" and plain.message_id == "msg_1"


async def test_a_session_restored_in_another_process(sqlite_server: LoomServer, loom: httpx.Client) -> None:
    history = LoomHistoryProvider(sqlite_server.url)
    session = await three_turns(history)
    out = child(sqlite_server.url, AgentSession.from_dict(json.loads(json.dumps(session.to_dict()))), "again")
    assert out.returncode == 0, out.stderr
    answer, state = out.stdout.splitlines()[:2]
    # The new process loaded the three turns: it saw four user messages.
    assert answer == "You said: again (4)"
    assert json.loads(state)["state"]["loom"] == {"thread_id": history.thread_id(session)}
    tid = history.thread_id(session)
    assert tid is not None
    assert texts(loom, tid) == THREE_TURNS + [("user", "again"), ("assistant", "You said: again (4)")]
    # And this process goes on from there.
    resp = await agent(history).run("more", session=session)
    assert resp.text == "You said: more (5)"
    await history.aclose()


async def test_fork_and_both_branches_go_on(sqlite_server: LoomServer, loom: httpx.Client) -> None:
    history = LoomHistoryProvider(sqlite_server.url)
    a = agent(history)
    session = await three_turns(history)
    fork = await history.fork(session)
    assert fork.session_id != session.session_id
    ftid, tid = history.thread_id(fork), history.thread_id(session)
    assert ftid is not None and tid is not None and ftid != tid
    assert (await a.run("left", session=session)).text == "You said: left (4)"
    assert (await a.run("right", session=fork)).text == "You said: right (4)"
    assert texts(loom, tid)[-2:] == [("user", "left"), ("assistant", "You said: left (4)")]
    assert texts(loom, ftid) == THREE_TURNS + [("user", "right"), ("assistant", "You said: right (4)")]
    family = get_json(loom, f"/v1/threads/{ftid}/family")
    assert tid in json.dumps(family)
    await history.aclose()


async def test_checkpoint_and_rollback(sqlite_server: LoomServer, loom: httpx.Client) -> None:
    history = LoomHistoryProvider(sqlite_server.url)
    a = agent(history)
    session = await three_turns(history)
    await history.checkpoint(session, "before")
    await a.run("oops", session=session)
    await history.rollback(session, "before")
    tid = history.thread_id(session)
    assert tid is not None
    assert texts(loom, tid) == THREE_TURNS
    assert (await a.run("fine", session=session)).text == "You said: fine (4)"
    names = json.dumps(get_json(loom, f"/v1/threads/{tid}/checkpoints"))
    assert "before" in names
    await history.aclose()


async def test_concurrent_sessions_do_not_mix(sqlite_server: LoomServer, loom: httpx.Client) -> None:
    history = LoomHistoryProvider(sqlite_server.url)
    a = agent(history)
    one, two = a.create_session(), a.create_session()

    async def talk(session: AgentSession, name: str) -> None:
        for i in range(5):
            await a.run(f"{name}{i}", session=session)

    await asyncio.gather(talk(one, "one"), talk(two, "two"))
    for s, name in ((one, "one"), (two, "two")):
        tid = history.thread_id(s)
        assert tid is not None
        want: list[tuple[str, ...]] = []
        for i in range(5):
            want += [("user", f"{name}{i}"), ("assistant", f"You said: {name}{i} ({i + 1})")]
        assert texts(loom, tid) == want
    await history.aclose()


async def test_a_killed_process_loses_no_acknowledged_turn(sqlite_server: LoomServer, loom: httpx.Client) -> None:
    history = LoomHistoryProvider(sqlite_server.url)
    session = await three_turns(history)
    out = child(sqlite_server.url, session, "add 4 5", kill=True)
    assert out.returncode == -9, out.stderr
    # The killed process never printed nor saved its session: the turn it
    # was told had run is in loom all the same, found from the old state.
    tid = history.thread_id(session)
    assert tid is not None
    assert texts(loom, tid)[len(THREE_TURNS):] == [
        ("user", "add 4 5"), ("assistant", 'call add {"a": 4, "b": 5}'), ("tool", "result 9"),
        ("assistant", "The sum is 9.", "data", "usage")]
    # A session that was never saved at all finds its thread by its id.
    fresh = AgentSession(session_id=session.session_id)
    assert (await agent(history).run("still here", session=fresh)).text == "You said: still here (5)"
    await history.aclose()


async def test_service_managed_by_loom(scripted_server: LoomServer) -> None:
    client = OpenAIChatClient(model="scripted", api_key="loom", base_url=base_url(scripted_server))
    from agent_framework import Agent

    a: Agent[Any] = Agent(client=client, tools=[add])
    with native(scripted_server) as loom:
        # Undetermined, then service-managed by the first run: the framework
        # chains responses (previous_response_id), so service_session_id is
        # the last response's id, which names its loom thread.
        session = a.create_session()
        assert session.service_session_id is None
        r1 = await a.run("hello", session=session)
        assert r1.text == "You said: hello"
        first = session.service_session_id
        assert isinstance(first, str) and first.startswith("resp_")
        r2 = await a.run('call add {"a": 2, "b": 3}', session=session)
        assert "5" in r2.text
        last = session.service_session_id
        assert isinstance(last, str) and last != first
        tid = thread_of(last)
        assert thread_of(first) == tid
        seen = messages(loom, tid)
        assert ("user", "hello") in seen and ("assistant", "You said: hello") in seen
        assert ("tool", "result 5") in seen

        # A loom conversation made beforehand is the session's for good.
        async with async_client(scripted_server) as oai:
            conv = await oai.conversations.create()
        csession = a.get_session(conv.id)
        assert (await a.run("hi there", session=csession)).text == "You said: hi there"
        assert csession.service_session_id == conv.id
        assert (await a.run("again", session=csession)).text == "You said: again"
        assert csession.service_session_id == conv.id
        # The conversation is the loom thread of that id, seen by loom's own API.
        assert messages(loom, conv.id) == [
            ("user", "hi there"), ("assistant", "You said: hi there"),
            ("user", "again"), ("assistant", "You said: again")]
