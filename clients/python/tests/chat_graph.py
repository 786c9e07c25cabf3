"""The chat agent the end-to-end tests and the benchmark run: a real
LangGraph StateGraph (MessagesState, add_messages) with an agent node that
calls langchain_core's GenericFakeChatModel and a tool node that runs each
tool call as its own task (Send), so a turn with two calls has two parallel
tasks whose writes are stored one by one.

The fake model is scripted by the conversation, not by a global iterator,
so a graph resumed in another process answers as the first one would have:
a human message gets a tool call (one per " and "-separated part; "ask:"
gets ask_human, whose tool interrupts for a person's answer), tool results
get a final answer. Tool call ids are deterministic (call_<turn>_<i>);
message ids are the model's and add_messages' own.

Sizes follow the benchmark's realistic turn: a tool result of about
TOOL_BYTES and a final answer of about ANSWER_BYTES.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from typing import Any, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.tool import ToolCall
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Send, interrupt

TOOL_BYTES = 300
ANSWER_BYTES = 800

_FILLER = (
    "The archive lists the item with its provenance, its condition and the "
    "notes of the people who handled it; each entry is dated and signed. "
)


def pad(text: str, size: int) -> str:
    """text followed by filler up to size characters."""
    if len(text) >= size:
        return text
    reps = (size - len(text)) // len(_FILLER) + 1
    return (text + " " + _FILLER * reps)[:size]


def _turn(messages: Sequence[BaseMessage]) -> int:
    return sum(1 for m in messages if isinstance(m, HumanMessage))


def scripted_reply(messages: Sequence[BaseMessage]) -> AIMessage:
    """What the scripted model says next in the conversation messages."""
    last = messages[-1]
    turn = _turn(messages)
    if isinstance(last, HumanMessage):
        text = str(last.content)
        if text.startswith("ask:"):
            calls = [ToolCall(name="ask_human", args={"question": text[4:].strip()}, id=f"call_{turn}_0")]
        else:
            calls = [
                ToolCall(name="lookup", args={"query": part.strip()}, id=f"call_{turn}_{i}")
                for i, part in enumerate(text.split(" and "))
            ]
        return AIMessage(content="", tool_calls=calls)
    results = []
    for m in reversed(messages):
        if not isinstance(m, ToolMessage):
            break
        results.append(str(m.content)[:60])
    return AIMessage(content=pad(f"Turn {turn}: " + " | ".join(reversed(results)), ANSWER_BYTES))


# Every tool call a tool ran in this process, in order: (tool, argument).
RAN: list[tuple[str, str]] = []

# Set in a process that is to die: the query whose lookup SIGKILLs the
# process, once the writes of every other task of its step are stored
# (kill_when says when that is).
KILL_ON_ENV = "LOOM_TEST_KILL_ON"
kill_when: Callable[[], bool] | None = None


def lookup(query: str) -> str:
    RAN.append(("lookup", query))
    if query == os.environ.get(KILL_ON_ENV):
        deadline = time.monotonic() + 30
        while kill_when is not None and not kill_when() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGKILL)
    return pad(f"Result for {query}:", TOOL_BYTES)


def ask_human(question: str) -> str:
    answer = interrupt({"question": question})
    RAN.append(("ask_human", str(answer)))
    return f"The person answered: {answer}"


TOOLS: dict[str, Callable[..., str]] = {"lookup": lookup, "ask_human": ask_human}


class ToolTask(TypedDict):
    call: ToolCall


def agent(state: MessagesState) -> dict[str, list[AnyMessage]]:
    model = GenericFakeChatModel(messages=iter([scripted_reply(state["messages"])]))
    return {"messages": [model.invoke(state["messages"])]}


def run_tool(state: ToolTask) -> dict[str, list[AnyMessage]]:
    call = state["call"]
    out = TOOLS[call["name"]](**call["args"])
    return {"messages": [ToolMessage(content=out, tool_call_id=call["id"] or "", name=call["name"])]}


def route(state: MessagesState) -> list[Send] | str:
    last = state["messages"][-1]
    if isinstance(last, AIMessage) and last.tool_calls:
        return [Send("tools", ToolTask(call=c)) for c in last.tool_calls]
    return END


def build(checkpointer: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The chat graph, compiled on checkpointer."""
    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", run_tool, input_schema=ToolTask)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END])
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=checkpointer)


def describe(m: BaseMessage) -> tuple[Any, ...]:
    """A message without its id (the model's and add_messages' ids are
    random): what two runs of the graph must agree on."""
    calls = tuple((c["name"], tuple(sorted(c["args"].items())), c["id"]) for c in getattr(m, "tool_calls", []))
    return (m.type, m.content, calls, getattr(m, "tool_call_id", None))
