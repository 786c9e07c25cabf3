"""The OpenAI Agents SDK (`openai-agents`) on loom: an Agent whose model is
loom's /openai/v1/responses (OpenAIResponsesModel) and whose session is
OpenAIConversationsSession with its client at loom, against a real `loom
serve --provider scripted` on SQLite. The session's conversation is a loom
thread: read through loom's own API, forked there, and the fork continued by
the SDK as a conversation of its own. Tracing is off: nothing leaves the
machine."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIConversationsSession,
    OpenAIResponsesModel,
    Runner,
    RunResult,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI
from openai.types.shared import Reasoning

from tests.oai import async_client, base_url, describe, get_json, messages, native, thread_of
from tests.servers import LoomServer

# The SDK exports traces to OpenAI by default; the tests make no network calls.
set_tracing_disabled(True)

CALLS: list[tuple[int, int]] = []


@function_tool
def add(a: int, b: int) -> int:
    """Adds two integers."""
    CALLS.append((a, b))
    return a + b


@pytest.fixture(scope="module")
async def client(scripted_server: LoomServer) -> AsyncIterator[AsyncOpenAI]:
    async with async_client(scripted_server) as c:
        yield c


@pytest.fixture(scope="module")
def loom(scripted_server: LoomServer) -> Iterator[httpx.Client]:
    with native(scripted_server) as c:
        yield c


@pytest.fixture
def agent(client: AsyncOpenAI) -> Agent[Any]:
    CALLS.clear()
    return Agent(
        name="calculator",
        instructions="Add numbers with the add tool.",
        tools=[add],
        model=OpenAIResponsesModel(model="loom", openai_client=client),
    )


def call(a: int, b: int) -> str:
    """The user text that makes the scripted model call add(a, b)."""
    return f"call add {json.dumps({'a': a, 'b': b})}"


def tool_turn(a: int, b: int) -> list[tuple[str, ...]]:
    """One turn with the tool, as loom stores it: (role, content)."""
    args = json.dumps({"a": a, "b": b}, sort_keys=True)
    return [
        ("user", call(a, b)),
        ("assistant", f"call add {args}"),
        ("tool", f"result {a + b}"),
        ("assistant", f"Tool add returned: {a + b}"),
    ]


async def three_turns(agent: Agent[Any], session: OpenAIConversationsSession) -> None:
    r1 = await Runner.run(agent, call(2, 3), session=session)
    assert r1.final_output == "Tool add returned: 5"
    r2 = await Runner.run(agent, call(40, 2), session=session)
    assert r2.final_output == "Tool add returned: 42"
    # The third turn streamed: the model's answer comes as Responses events.
    r3 = Runner.run_streamed(agent, call(7, 8), session=session)
    async for _ in r3.stream_events():
        pass
    assert r3.final_output == "Tool add returned: 15"
    assert CALLS == [(2, 3), (40, 2), (7, 8)]  # the tool really ran, each time


def response_thread(result: RunResult) -> str:
    """The loom thread of a run's last model response."""
    rid = result.raw_responses[-1].response_id
    assert rid is not None
    return thread_of(rid)


async def test_agent_session_in_loom_forked_and_continued(
    agent: Agent[Any], client: AsyncOpenAI, loom: httpx.Client
) -> None:
    session = OpenAIConversationsSession(openai_client=client)
    await three_turns(agent, session)
    conv = session.session_id
    turns = tool_turn(2, 3) + tool_turn(40, 2) + tool_turn(7, 8)

    # The conversation is a loom thread: loom's own API reads the turns in order.
    assert messages(loom, conv) == turns
    th = get_json(loom, f"/v1/threads/{conv}")
    assert th["labels"].get("openai") == "conversation"
    # The session reads the same through the Conversations API.
    items = await session.get_items()
    assert [describe(i) for i in items][:4] == [
        ("user", call(2, 3)),
        ("function_call", "add", json.dumps({"a": 2, "b": 3}, sort_keys=True)),
        ("function_call_output", "5"),
        ("assistant", "Tool add returned: 5"),
    ]
    assert len(items) == 12
    assert [describe(i) for i in await session.get_items(limit=2)] == [
        ("function_call_output", "15"),
        ("assistant", "Tool add returned: 15"),
    ]

    # Forked in loom, the fork is a conversation the SDK uses at once.
    r = loom.post(f"/v1/threads/{conv}/fork", json={})
    assert r.status_code == 201, r.text
    fork = r.json()
    assert fork["forked_from"]["thread"] == conv
    fork_session = OpenAIConversationsSession(conversation_id=fork["id"], openai_client=client)
    assert [describe(i) for i in await fork_session.get_items()] == [describe(i) for i in items]

    result = await Runner.run(agent, call(100, 1), session=fork_session)
    assert result.final_output == "Tool add returned: 101"
    assert CALLS[-1] == (100, 1)
    # The fork saw the history: the model's last request held every turn.
    said = messages(loom, response_thread(result))
    assert said[: len(turns)] == turns
    assert said[len(turns) :] == tool_turn(100, 1)

    assert messages(loom, fork["id"]) == turns + tool_turn(100, 1)
    # The original does not see the fork's turn.
    assert messages(loom, conv) == turns
    assert len(await session.get_items()) == 12
    assert len(await fork_session.get_items()) == 16

    # And the original goes on by itself.
    plain = await Runner.run(agent, "Thanks", session=session)
    assert plain.final_output == "You said: Thanks"
    assert messages(loom, conv) == turns + [("user", "Thanks"), ("assistant", "You said: Thanks")]
    assert messages(loom, fork["id"]) == turns + tool_turn(100, 1)


async def test_session_pop_item_and_clear(agent: Agent[Any], client: AsyncOpenAI, loom: httpx.Client) -> None:
    session = OpenAIConversationsSession(openai_client=client)
    await Runner.run(agent, "first", session=session)
    await Runner.run(agent, "second", session=session)
    conv = session.session_id
    version = get_json(loom, f"/v1/threads/{conv}")["version"]

    popped = await session.pop_item()
    assert popped is not None and describe(popped) == ("assistant", "You said: second")
    assert [describe(i) for i in await session.get_items()] == [
        ("user", "first"),
        ("assistant", "You said: first"),
        ("user", "second"),
    ]
    # A new version without the item; the old one still reads with it.
    assert get_json(loom, f"/v1/threads/{conv}")["version"] == version + 1
    assert messages(loom, conv, version=version)[-1] == ("assistant", "You said: second")

    await session.clear_session()
    assert loom.get(f"/v1/threads/{conv}").status_code == 404
    # The session starts a new conversation on its next use.
    await Runner.run(agent, "again", session=session)
    assert session.session_id != conv
    assert messages(loom, session.session_id) == [("user", "again"), ("assistant", "You said: again")]


async def test_runner_with_server_conversation(agent: Agent[Any], client: AsyncOpenAI, loom: httpx.Client) -> None:
    """Runner.run(conversation_id=...) leaves the history to the server: each
    request sends only the new input (the tool's output alone on the
    second), and loom finds the call in the conversation it keeps."""
    conv = await client.conversations.create()
    result = await Runner.run(agent, call(5, 6), conversation_id=conv.id)
    assert result.final_output == "Tool add returned: 11"
    assert messages(loom, conv.id) == tool_turn(5, 6)
    again = await Runner.run(agent, "ok", conversation_id=conv.id)
    assert again.final_output == "You said: ok"
    assert messages(loom, conv.id)[-2:] == [("user", "ok"), ("assistant", "You said: ok")]


async def test_runner_with_previous_response_id(agent: Agent[Any], loom: httpx.Client) -> None:
    first = await Runner.run(agent, call(1, 2), auto_previous_response_id=True)
    assert first.final_output == "Tool add returned: 3"
    assert first.last_response_id is not None
    second = await Runner.run(agent, "next", previous_response_id=first.last_response_id)
    assert second.final_output == "You said: next"
    assert messages(loom, response_thread(second)) == tool_turn(1, 2) + [("user", "next"), ("assistant", "You said: next")]


def test_package_readme_example_runs(scripted_server: LoomServer) -> None:
    """The Agents SDK example of this package's README, run as a script
    against the test server (tracing off through the SDK's variable)."""
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = text.split("## Use loom from the OpenAI SDKs", 1)[1].split("\n## ", 1)[0]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "no python block in the package README's OpenAI section"
    code = m.group(1).replace("http://127.0.0.1:8080/openai/v1", base_url(scripted_server))
    env = {**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "1", "OPENAI_API_KEY": ""}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "You said: Hello!\n"


async def test_model_settings_are_accepted(client: AsyncOpenAI) -> None:
    """The request fields an Agents SDK user commonly sets (sampling,
    limits, tool choice, truncation, metadata, reasoning, verbosity, store)
    are ones loom takes."""
    CALLS.clear()
    agent = Agent(
        name="tuned",
        tools=[add],
        model=OpenAIResponsesModel(model="loom", openai_client=client),
        model_settings=ModelSettings(
            temperature=0.2,
            top_p=0.9,
            max_tokens=200,
            tool_choice="auto",
            parallel_tool_calls=True,
            truncation="auto",
            metadata={"app": "tests"},
            reasoning=Reasoning(effort="low"),
            verbosity="low",
            store=True,
        ),
    )
    result = await Runner.run(agent, call(3, 4))
    assert result.final_output == "Tool add returned: 7"
    assert CALLS == [(3, 4)]
    # loom kept the settings the SDK sent with the response.
    rid = result.raw_responses[0].response_id
    assert rid is not None
    stored = await client.responses.retrieve(rid)
    assert (stored.temperature, stored.top_p, stored.max_output_tokens) == (0.2, 0.9, 200)
    assert (stored.truncation, stored.metadata, stored.parallel_tool_calls) == ("auto", {"app": "tests"}, True)
    assert stored.reasoning is not None and stored.reasoning.effort == "low"
    assert stored.text is not None and stored.text.verbosity == "low"
