"""LangGraph's DeltaChannel (beta) on LoomSaver: a channel stored as its
writes, rebuilt by get_delta_channel_history, which LoomSaver answers in
one request (loom's delta-history route). The route must give what the
base class's walk of get_tuple gives, and a graph with delta channels the
same states as on LangGraph's InMemorySaver."""

from __future__ import annotations

import operator
import uuid
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import _messages_delta_reducer

from loomthreads.langgraph import LoomSaver
from tests.chat_graph import describe
from tests.servers import LoomServer


def _concat(state: list[str], writes: Sequence[list[str]]) -> list[str]:
    return state + [x for w in writes for x in w]


class State(TypedDict):
    items: Annotated[list[str], DeltaChannel(_concat, snapshot_frequency=3)]
    messages: Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer, snapshot_frequency=4)]
    count: Annotated[int, operator.add]


def step(state: State) -> dict[str, Any]:
    n = len(state["items"])
    return {"items": [f"item-{n}"], "messages": [AIMessage(f"seen {n}", id=f"ai-{n}")], "count": 1}


def _graph(saver: BaseCheckpointSaver[Any]) -> Any:
    g = StateGraph(State)
    g.add_node("step", step)
    g.add_edge(START, "step")
    return g.compile(checkpointer=saver)


def _run(saver: BaseCheckpointSaver[Any], tid: str) -> list[Any]:
    graph = _graph(saver)
    cfg: RunnableConfig = {"configurable": {"thread_id": tid}}
    for i in range(7):
        graph.invoke({"items": [f"in-{i}"], "messages": [HumanMessage(f"q{i}", id=f"h-{i}")], "count": 0}, cfg)
    return [
        (h.values.get("items"), [describe(m) for m in h.values.get("messages", [])], h.values.get("count"), h.next)
        for h in graph.get_state_history(cfg)
    ]


def test_delta_channels_match_in_memory(server: LoomServer) -> None:
    tid = f"delta-{uuid.uuid4()}"
    with LoomSaver(url=server.url) as saver:
        on_loom = _run(saver, tid)
        ref = _run(InMemorySaver(), tid)
        assert on_loom == ref
        assert on_loom[0][0] == [x for i in range(7) for x in (f"in-{i}", f"item-{2 * i + 1}")]

        # The one-request route against the base class's walk of get_tuple,
        # at every checkpoint of the thread.
        for tup in saver.list({"configurable": {"thread_id": tid}}):
            routed = saver.get_delta_channel_history(config=tup.config, channels=["items", "messages", "none"])
            walked = BaseCheckpointSaver.get_delta_channel_history(
                saver, config=tup.config, channels=["items", "messages", "none"]
            )
            assert _plain(routed) == _plain(walked), tup.config


async def test_async_delta_history(server: LoomServer) -> None:
    tid = f"adelta-{uuid.uuid4()}"
    async with LoomSaver(url=server.url) as saver:
        graph = _graph(saver)
        cfg: RunnableConfig = {"configurable": {"thread_id": tid}}
        for i in range(5):
            await graph.ainvoke({"items": [f"in-{i}"], "messages": [], "count": 0}, cfg)
        state = await graph.aget_state(cfg)
        assert state.values["items"] == [x for i in range(5) for x in (f"in-{i}", f"item-{2 * i + 1}")]
        routed = await saver.aget_delta_channel_history(config=state.config, channels=["items"])
        walked = await BaseCheckpointSaver.aget_delta_channel_history(saver, config=state.config, channels=["items"])
        assert _plain(routed) == _plain(walked)


def _plain(h: Any) -> Any:
    """A history with messages compared by what they say."""
    out = {}
    for ch, e in h.items():
        writes = [(t, c, _norm(v)) for t, c, v in e["writes"]]
        out[ch] = {"writes": writes, **({"seed": repr(e["seed"])} if "seed" in e else {})}
    return out


def _norm(v: Any) -> Any:
    if isinstance(v, list):
        return [describe(m) if hasattr(m, "type") and hasattr(m, "content") else m for m in v]
    return v
