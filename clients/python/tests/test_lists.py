"""A turn sends and receives what it adds, not the thread (LG.md: extends,
shares, sum): puts extend their parent's list, gets name the list the saver
holds, lists share; and when loom's list is not the one the saver holds,
the whole list goes again and the result is still exact."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint

from loomthreads import Client
from loomthreads.langgraph import LoomSaver
from tests.chat_graph import build
from tests.servers import LoomServer


class Wire:
    """Every request a saver's sync client sends (method, path, query,
    body) and the status of each answer, by request."""

    def __init__(self, saver: LoomSaver) -> None:
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []
        self.status: dict[int, int] = {}
        saver.client._http.event_hooks["request"].append(self._record)
        saver.client._http.event_hooks["response"].append(self._answer)

    def _record(self, req: httpx.Request) -> None:
        body = json.loads(req.content) if req.content else None
        req.extensions["wire_index"] = len(self.requests)
        self.requests.append((req.method, req.url.path, dict(req.url.params), body))

    def _answer(self, resp: httpx.Response) -> None:
        self.status[resp.request.extensions["wire_index"]] = resp.status_code

    def puts(self, *, first_attempts: bool = False) -> list[Any]:
        """The puts' bodies; first_attempts: without the resends that
        follow a 409."""
        out = []
        retry = False
        for i, (m, p, _, b) in enumerate(self.requests):
            if p != "/v1/langgraph/checkpoints":
                continue
            if not (first_attempts and retry):
                out.append(b)
            retry = self.status.get(i) == 409
        return out

    def statuses(self, path: str) -> list[int]:
        return [self.status[i] for i, r in enumerate(self.requests) if r[1] == path]

    def gets(self) -> list[dict[str, str]]:
        return [q for m, p, q, _ in self.requests if p == "/v1/langgraph/checkpoint"]


@pytest.fixture
def saver(server: LoomServer) -> Iterator[LoomSaver]:
    with LoomSaver(url=server.url) as s:
        yield s


def test_a_turn_sends_what_it_adds(saver: LoomSaver) -> None:
    wire = Wire(saver)
    graph = build(saver)
    cfg: RunnableConfig = {"configurable": {"thread_id": f"adds-{uuid.uuid4()}"}}
    for i in range(6):
        graph.invoke({"messages": [HumanMessage(f"question {i}")]}, cfg)
    sent = [
        p["channel_values"]["messages"] for p in wire.puts(first_attempts=True) if "messages" in p["channel_values"]
    ]
    assert sent, "no put carried messages"
    # The first put of the thread sends its one message; every later one
    # extends its parent's list with the messages the step added (a 409
    # would make the saver send the whole list again, which the
    # conflict test covers).
    assert "extends" not in sent[0] and len(sent[0]["messages"]) == 1
    assert all("extends" in v for v in sent[1:]), [sorted(v) for v in sent]
    assert max(len(v["messages"]) for v in sent[1:]) <= 2
    # Writes wait for their checkpoint's put rather than reach loom first.
    assert set(wire.statuses("/v1/langgraph/writes")) == {204}
    # After the first turn, each turn's get names the list it holds, and
    # is answered with the rest only.
    assert all("messages_n" in q for q in wire.gets()[1:])
    state = graph.get_state(cfg)
    assert len(state.values["messages"]) == 24


def _put(saver: LoomSaver, tid: str, msgs: list[BaseMessage], parent: str | None = None) -> RunnableConfig:
    cp: Checkpoint = empty_checkpoint()
    cp["channel_values"] = {"messages": msgs}
    cp["channel_versions"] = {"messages": len(msgs)}
    cfg: RunnableConfig = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
    if parent:
        cfg["configurable"]["checkpoint_id"] = parent
    return saver.put(cfg, cp, {"source": "loop", "step": len(msgs)}, {"messages": len(msgs)})


def _ids(msgs: list[BaseMessage]) -> list[str | None]:
    return [m.id for m in msgs]


def test_a_list_that_is_not_the_parents_goes_whole(server: LoomServer) -> None:
    tid = f"conflict-{uuid.uuid4()}"
    m1, m2, m3 = (HumanMessage(f"m{i}", id=f"m{i}") for i in (1, 2, 3))
    other = AIMessage("other", id="other")
    with LoomSaver(url=server.url) as a, LoomSaver(url=server.url) as b:
        first = _put(a, tid, [m1, m2])
        parent = first["configurable"]["checkpoint_id"]
        # Behind a's back, the thread is made again with another list
        # under the same checkpoint id.
        b.delete_thread(tid)
        cp = empty_checkpoint()
        cp["id"] = parent
        cp["channel_values"] = {"messages": [m1, other]}
        cp["channel_versions"] = {"messages": 2}
        b.put({"configurable": {"thread_id": tid, "checkpoint_ns": ""}}, cp, {}, {"messages": 2})

        wire = Wire(a)
        second = _put(a, tid, [m1, m2, m3], parent)
        assert [("extends" in p["channel_values"]["messages"]) for p in wire.puts()] == [True, False]
        assert wire.statuses("/v1/langgraph/checkpoints") == [409, 200]
        got = b.get_tuple(second)
        assert got is not None
        assert _ids(got.checkpoint["channel_values"]["messages"]) == ["m1", "m2", "m3"]


def test_get_receives_the_rest_and_reuses_its_objects(server: LoomServer) -> None:
    tid = f"rest-{uuid.uuid4()}"
    msgs: list[BaseMessage] = [HumanMessage(f"m{i}", id=f"m{i}") for i in range(5)]
    with LoomSaver(url=server.url) as writer, LoomSaver(url=server.url) as reader:
        first = _put(writer, tid, msgs[:3])
        got1 = reader.get_tuple(first)
        assert got1 is not None
        held = got1.checkpoint["channel_values"]["messages"]
        second = _put(writer, tid, msgs, first["configurable"]["checkpoint_id"])

        known = reader._lists.last(tid, "")
        assert known is not None and known.n == 3
        with Client(server.url) as raw:
            answer = raw.get_checkpoint({"thread_id": tid}, known.sum())
        assert answer is not None
        value = answer["checkpoint"]["channel_values"]["messages"]
        assert value.get("extends") == known.sum() and len(value["messages"]) == 2

        got2 = reader.get_tuple(second)
        assert got2 is not None
        rebuilt = got2.checkpoint["channel_values"]["messages"]
        assert rebuilt == msgs
        assert all(a is b for a, b in zip(rebuilt, held))  # the held objects, reused


def test_list_rebuilds_shared_lists(server: LoomServer) -> None:
    tid = f"shares-{uuid.uuid4()}"
    msgs: list[BaseMessage] = [HumanMessage(f"m{i}", id=f"m{i}") for i in range(4)]
    with LoomSaver(url=server.url) as saver:
        parent = None
        for k in range(1, 5):
            parent = _put(saver, tid, msgs[:k], parent)["configurable"]["checkpoint_id"]
        with Client(server.url) as raw:
            answer = raw.list_checkpoints({"thread_id": tid})
        shares = [t["checkpoint"]["channel_values"]["messages"].get("shares") for t in answer["checkpoints"]]
        assert shares[0] is None and all(s is not None for s in shares[1:]), shares
        listed = list(saver.list({"configurable": {"thread_id": tid}}))
        assert [_ids(t.checkpoint["channel_values"]["messages"]) for t in listed] == [
            _ids(msgs[:k]) for k in (4, 3, 2, 1)
        ]
        for t in listed:
            one = saver.get_tuple(t.config)
            assert one is not None
            assert one.checkpoint["channel_values"]["messages"] == t.checkpoint["channel_values"]["messages"]
