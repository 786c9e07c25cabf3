"""End to end: the chat agent of chat_graph (a real StateGraph, a fake chat
model, a tool node with parallel tasks) on LoomSaver against loom serve,
compared with the same graph on LangGraph's own SqliteSaver.

- A process running the graph is SIGKILLed inside a tool, after the other
  task of its step stored its writes; the graph resumes in this process
  from loom alone, without running the finished task again.
- A scenario (two turns, get_state_history, update_state at a past
  checkpoint and a run from the branch, an interrupt() resumed with
  Command(resume=...)) gives the same observations on LoomSaver (sync and
  async) as on SqliteSaver.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.messages.tool import ToolCall
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from loomthreads.langgraph import LoomSaver
from tests import chat_graph
from tests.chat_graph import build, describe
from tests.servers import LoomServer

PACKAGE = Path(__file__).resolve().parents[1]


@pytest.fixture
def loom(server: LoomServer) -> Iterator[LoomSaver]:
    with LoomSaver(url=server.url) as saver:
        yield saver


@pytest.fixture
def sqlite() -> Iterator[SqliteSaver]:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def _messages(values: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [describe(m) for m in values.get("messages", [])]


def test_resume_after_sigkill(server: LoomServer, sqlite: SqliteSaver) -> None:
    tid = f"crash-{uuid.uuid4()}"
    child = subprocess.run(
        [sys.executable, "-m", "tests.crash_child", server.url, tid, "alpha and omega"],
        cwd=PACKAGE,
        env=os.environ | {chat_graph.KILL_ON_ENV: "omega"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr

    with LoomSaver(url=server.url) as saver:
        graph = build(saver)
        cfg = _config(tid)
        before = graph.get_state(cfg)
        # Killed in the tools step: the model's two tool calls are
        # stored, alpha's result is a pending write of its task (which
        # get_state shows applied), omega's task has none.
        assert before.next == ("tools",)
        assert [t.name for t in before.tasks] == ["tools", "tools"]
        done = [t for t in before.tasks if t.result is not None]
        assert len(done) == 1 and "Result for alpha" in str(done[0].result)
        assert [m[0] for m in _messages(before.values)] == ["human", "ai", "tool"]
        tup = saver.get_tuple(cfg)
        assert tup is not None and tup.pending_writes is not None
        assert {w[0] for w in tup.pending_writes} == {done[0].id}

        chat_graph.RAN.clear()
        final = graph.invoke(None, cfg)
        assert chat_graph.RAN == [("lookup", "omega")], "alpha ran again"
        after = graph.get_state(cfg)
        assert after.next == ()

    # The same input, never interrupted, on SqliteSaver.
    chat_graph.RAN.clear()
    ref = build(sqlite).invoke({"messages": [HumanMessage("alpha and omega")]}, _config(tid))
    assert _messages(final) == _messages(ref)
    assert [m[0] for m in _messages(final)] == ["human", "ai", "tool", "tool", "ai"]


def scenario(graph: Any, thread_id: str) -> list[Any]:
    """Runs the chat graph through history, a branch and an interrupt, and
    returns what a user would see at each point (message ids aside)."""
    cfg = _config(thread_id)
    obs: list[Any] = []

    def state(label: str, config: RunnableConfig = cfg) -> None:
        s = graph.get_state(config)
        obs.append((label, _messages(s.values), s.next, s.metadata["source"], s.metadata["step"]))

    graph.invoke({"messages": [HumanMessage("alpha and beta")]}, cfg)
    state("turn 1")
    graph.invoke({"messages": [HumanMessage("gamma")]}, cfg)
    state("turn 2")

    history = list(graph.get_state_history(cfg))
    obs.append(("history", [(len(_messages(h.values)), h.next, h.metadata["step"]) for h in history]))
    obs.append(("history limit 3", [h.metadata["step"] for h in graph.get_state_history(cfg, limit=3)]))
    turn2_end = history[0].config

    # Branch: turn 2's tool call, edited at its checkpoint to look up
    # "delta" instead; the graph continues from the edit.
    past = next(h for h in history if h.next == ("tools",) and len(h.values["messages"]) == 7)
    call = past.values["messages"][-1]
    edited = AIMessage(
        id=call.id, content="", tool_calls=[ToolCall(name="lookup", args={"query": "delta"}, id="call_2_0")]
    )
    branch = graph.update_state(past.config, {"messages": [edited]})
    state("edited", branch)
    graph.invoke(None, branch)
    state("branch end")
    state("old end still there", turn2_end)
    obs.append(("history after branch", len(list(graph.get_state_history(cfg)))))

    # Interrupt: ask_human waits for a person; Command(resume=...) answers.
    out = graph.invoke({"messages": [HumanMessage("ask: may I?")]}, cfg)
    obs.append(("interrupt", [i.value for i in out["__interrupt__"]]))
    state("waiting")
    graph.invoke(Command(resume="yes"), cfg)
    state("resumed")
    return obs


async def ascenario(graph: Any, thread_id: str) -> list[Any]:
    """scenario, through the graph's async methods (LoomSaver's async half)."""
    cfg = _config(thread_id)
    obs: list[Any] = []

    async def state(label: str, config: RunnableConfig = cfg) -> None:
        s = await graph.aget_state(config)
        obs.append((label, _messages(s.values), s.next, s.metadata["source"], s.metadata["step"]))

    await graph.ainvoke({"messages": [HumanMessage("alpha and beta")]}, cfg)
    await state("turn 1")
    await graph.ainvoke({"messages": [HumanMessage("gamma")]}, cfg)
    await state("turn 2")

    history = [h async for h in graph.aget_state_history(cfg)]
    obs.append(("history", [(len(_messages(h.values)), h.next, h.metadata["step"]) for h in history]))
    obs.append(("history limit 3", [h.metadata["step"] async for h in graph.aget_state_history(cfg, limit=3)]))
    turn2_end = history[0].config

    past = next(h for h in history if h.next == ("tools",) and len(h.values["messages"]) == 7)
    call = past.values["messages"][-1]
    edited = AIMessage(
        id=call.id, content="", tool_calls=[ToolCall(name="lookup", args={"query": "delta"}, id="call_2_0")]
    )
    branch = await graph.aupdate_state(past.config, {"messages": [edited]})
    await state("edited", branch)
    await graph.ainvoke(None, branch)
    await state("branch end")
    await state("old end still there", turn2_end)
    obs.append(("history after branch", len([h async for h in graph.aget_state_history(cfg)])))

    out = await graph.ainvoke({"messages": [HumanMessage("ask: may I?")]}, cfg)
    obs.append(("interrupt", [i.value for i in out["__interrupt__"]]))
    await state("waiting")
    await graph.ainvoke(Command(resume="yes"), cfg)
    await state("resumed")
    return obs


def _check_scenario(obs: list[Any]) -> None:
    """What the scenario must show, whichever saver ran it."""
    by = {o[0]: o for o in obs}
    assert [m[0] for m in by["turn 2"][1]] == ["human", "ai", "tool", "tool", "ai", "human", "ai", "tool", "ai"]
    assert by["turn 2"][2] == ()
    history = by["history"][1]
    assert history[0][0] == 9 and history[-1] == (0, ("__start__",), -1)
    assert by["history limit 3"][1] == [s for _, _, s in history[:3]]
    edited = by["edited"][1]
    assert edited[-1][2] == (("lookup", (("query", "delta"),), "call_2_0"),)
    assert by["edited"][2] == ("tools",) and by["edited"][3] == "update"
    end = by["branch end"][1]
    assert "Result for delta" in end[-2][1] and "Result for gamma" not in end[-2][1]
    assert "Result for gamma" in by["old end still there"][1][-2][1]
    assert by["history after branch"][1] > len(history)
    assert by["interrupt"][1] == [{"question": "may I?"}]
    assert by["waiting"][2] == ("tools",)
    assert by["resumed"][1][-2][1] == "The person answered: yes"
    assert by["resumed"][2] == ()


def test_scenario_matches_sqlite(loom: LoomSaver, sqlite: SqliteSaver) -> None:
    tid = f"scenario-{uuid.uuid4()}"
    on_loom = scenario(build(loom), tid)
    on_sqlite = scenario(build(sqlite), tid)
    _check_scenario(on_loom)
    assert on_loom == on_sqlite


async def test_async_scenario_matches_sqlite(loom: LoomSaver, sqlite: SqliteSaver) -> None:
    tid = f"ascenario-{uuid.uuid4()}"
    on_loom = await ascenario(build(loom), tid)
    on_sqlite = scenario(build(sqlite), tid)
    _check_scenario(on_loom)
    assert on_loom == on_sqlite


def test_one_saver_many_threads_and_loops(server: LoomServer) -> None:
    """One LoomSaver shared by graphs running at once in OS threads, and by
    two event loops one after the other (each gets its own connections)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    with LoomSaver(url=server.url) as saver:
        graph = build(saver)
        tids = [f"many-{i}-{uuid.uuid4()}" for i in range(4)]

        def run(tid: str) -> list[tuple[Any, ...]]:
            for q in ("alpha and beta", "gamma"):
                graph.invoke({"messages": [HumanMessage(f"{q} for {tid[:6]}")]}, _config(tid))
            return _messages(graph.get_state(_config(tid)).values)

        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(run, tids))
        for tid, msgs in zip(tids, results, strict=True):
            assert [m[0] for m in msgs] == ["human", "ai", "tool", "tool", "ai", "human", "ai", "tool", "ai"]
            assert all(tid[:6] in str(m[1]) for m in msgs if m[0] == "human")

        async def turn(tid: str) -> int:
            await graph.ainvoke({"messages": [HumanMessage("delta")]}, _config(tid))
            return len((await graph.aget_state(_config(tid))).values["messages"])

        assert asyncio.run(turn(tids[0])) == 13
        assert asyncio.run(turn(tids[0])) == 17  # a new loop, the same saver
