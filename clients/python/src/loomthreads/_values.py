"""How a channel's value travels: a serializer's blob, or, for the channel
named "messages", LangChain messages in their stored form, which loom keeps
as its own messages (stored once, whatever the number of checkpoints that
hold them).

A messages list goes as messages only when every element comes back from
its stored form as an equal object of the same class; anything else (a
message without an id, a custom message class, a field that is not plain
JSON, a list holding something that is not a message) goes as a blob, so a
value always round-trips exactly.
"""

from __future__ import annotations

import base64
import math
import threading
from collections import OrderedDict
from typing import Any, Final

from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict
from langgraph.checkpoint.serde.base import SerializerProtocol

from loomthreads._types import LangGraphValue, LangGraphValueMessagesItem

MESSAGES: Final = "messages"


def _plain_json(v: Any) -> bool:
    """Whether v survives JSON unchanged (no tuples, no NaN, str keys)."""
    if v is None or isinstance(v, (str, bool, int)):
        return True
    if isinstance(v, float):
        return math.isfinite(v)
    if type(v) is list:
        return all(_plain_json(x) for x in v)
    if type(v) is dict:
        return all(isinstance(k, str) and _plain_json(x) for k, x in v.items())
    return False


def _stored(m: BaseMessage) -> LangGraphValueMessagesItem | None:
    """m's stored form, when it has an id and comes back from it exactly."""
    if not isinstance(m.id, str) or not m.id:
        return None
    d = message_to_dict(m)
    if not _plain_json(d):
        return None
    back = messages_from_dict([d])[0]
    if type(back) is not type(m) or back != m:
        return None
    return d  # type: ignore[return-value]  # message_to_dict is dict[str, Any]


def _fields(m: BaseMessage) -> tuple[Any, ...]:
    """The objects m's fields hold (extra fields included): a field set
    anew holds another object."""
    extra = m.__pydantic_extra__
    return (*m.__dict__.values(), *(extra.items() if extra else ()))


class MessageCodec:
    """Turns a messages list into its stored form, remembering the stored
    form of the last messages it saw.

    A thread's messages channel holds the same message objects checkpoint
    after checkpoint (add_messages keeps them and appends), so converting
    and checking each of them at every put would make a put cost the
    length of the thread. A message seen before is taken from memory when
    it is the same object and each of its fields still holds the same
    object; a field assigned anew, or a message replaced (add_messages
    replaces by id with a new object), is converted again. A change made
    inside a field's value in place (appending to a message's tool_calls,
    say) is not seen: LangGraph's state is replaced, not mutated, and
    other checkpointers would keep such a change only by accident of when
    they serialize."""

    def __init__(self, size: int = 50_000) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._memo: OrderedDict[int, tuple[BaseMessage, tuple[Any, ...], LangGraphValueMessagesItem]] = (
            OrderedDict()
        )

    def stored(self, value: Any, *, empty: bool = False) -> list[LangGraphValueMessagesItem] | None:
        """value's messages in their stored form, or None when value is not
        a non-empty (empty: or empty) list of messages that each round-trip
        exactly."""
        if type(value) is not list or not (value or empty):
            return None
        out: list[LangGraphValueMessagesItem] = []
        fresh: list[tuple[BaseMessage, tuple[Any, ...], LangGraphValueMessagesItem]] = []
        for m in value:
            if not isinstance(m, BaseMessage):
                return None
            fields = _fields(m)
            with self._lock:
                hit = self._memo.get(id(m))
                if (
                    hit is not None
                    and hit[0] is m
                    and len(fields) == len(hit[1])
                    and all(a is b for a, b in zip(fields, hit[1]))
                ):
                    self._memo.move_to_end(id(m))
                    out.append(hit[2])
                    continue
            d = _stored(m)
            if d is None:
                return None
            out.append(d)
            fresh.append((m, fields, d))
        if fresh and self._size > 0:
            with self._lock:
                for m, fields, d in fresh:
                    self._memo[id(m)] = (m, fields, d)
                    self._memo.move_to_end(id(m))
                while len(self._memo) > self._size:
                    self._memo.popitem(last=False)
        return out


def stored_messages(value: Any) -> list[LangGraphValueMessagesItem] | None:
    """value's messages in their stored form, or None when value is not a
    non-empty list of messages that each round-trip exactly."""
    return MessageCodec(0).stored(value)


def encode(
    serde: SerializerProtocol, channel: str, value: Any, codec: MessageCodec | None = None
) -> LangGraphValue:
    """The wire form of channel's value (codec: remembered messages)."""
    if channel == MESSAGES:
        msgs = (codec or MessageCodec(0)).stored(value)
        if msgs is not None:
            return {"messages": msgs}
    typ, data = serde.dumps_typed(value)
    return {"blob": {"type": typ, "data": base64.b64encode(data).decode("ascii")}}


def decode(serde: SerializerProtocol, value: LangGraphValue) -> Any:
    """The value a wire value stands for (for a messages list sent as its
    new part only, the new part)."""
    if "messages" in value:
        return messages_from_dict([dict(m) for m in value["messages"]])
    blob = value["blob"]
    return serde.loads_typed((blob["type"], base64.b64decode(blob["data"])))


__all__ = ["MESSAGES", "MessageCodec", "decode", "encode", "stored_messages"]
