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


def stored_messages(value: Any) -> list[LangGraphValueMessagesItem] | None:
    """value's messages in their stored form, or None when value is not a
    non-empty list of messages that each round-trip exactly."""
    if type(value) is not list or not value:
        return None
    out: list[LangGraphValueMessagesItem] = []
    for m in value:
        if not isinstance(m, BaseMessage) or not isinstance(m.id, str) or not m.id:
            return None
        d = message_to_dict(m)
        if not _plain_json(d):
            return None
        back = messages_from_dict([d])[0]
        if type(back) is not type(m) or back != m:
            return None
        out.append(d)  # type: ignore[arg-type]  # message_to_dict is dict[str, Any]
    return out


def encode(serde: SerializerProtocol, channel: str, value: Any) -> LangGraphValue:
    """The wire form of channel's value."""
    if channel == MESSAGES:
        msgs = stored_messages(value)
        if msgs is not None:
            return {"messages": msgs}
    typ, data = serde.dumps_typed(value)
    return {"blob": {"type": typ, "data": base64.b64encode(data).decode("ascii")}}


def decode(serde: SerializerProtocol, value: LangGraphValue) -> Any:
    """The value a wire value stands for."""
    if "messages" in value:
        return messages_from_dict([dict(m) for m in value["messages"]])
    blob = value["blob"]
    return serde.loads_typed((blob["type"], base64.b64decode(blob["data"])))


__all__ = ["MESSAGES", "decode", "encode", "stored_messages"]
