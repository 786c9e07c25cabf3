"""LoomHistoryProvider: the Microsoft Agent Framework's sessions kept by loom.

Needs agent-framework-core installed. A history provider (the framework's
``HistoryProvider``, the extension point of its ``InMemoryHistoryProvider``)
that keeps each ``AgentSession``'s messages in a loom thread, through loom's
native API (``/v1/threads``)::

    from agent_framework import Agent
    from loomthreads.agent_framework import LoomHistoryProvider

    history = LoomHistoryProvider("http://127.0.0.1:8080")
    agent = Agent(client=chat_client, context_providers=[history])
    session = agent.create_session()
    await agent.run("Hello", session=session)

The session's state (what ``AgentSession.to_dict`` serializes) holds the
thread's id under the provider's source id, so a session restored in
another process finds its thread. A session's thread is named after its
``session_id`` when that is a valid loom id, so even a session whose state
was never saved finds the turns it ran.

Each turn is one commit (one ``POST /v1/threads/{id}/messages``): a turn the
agent answered is durable in loom. Messages are stored in loom's own shape
(text, reasoning, function calls and results, data, usage, errors), so the
page and the other clients show them, and each carries the framework's
whole ``Message.to_dict()`` in its metadata under ``agent_framework``, which
is what is read back: nothing the framework's model holds is lost, including
content types loom's model has no variant for. A message appended to the
thread by something else (the page, another client) is read from loom's
shape.

``fork``, ``checkpoint`` and ``rollback`` are each one loom operation on the
session's thread; a forked session is usable by the agent at once.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import uuid
import weakref
from collections.abc import Sequence
from typing import Any, ClassVar

from agent_framework import AgentSession, Content, HistoryProvider, Message

from loomthreads.client import AsyncClient, LoomError

__all__ = ["LoomHistoryProvider", "message_from_loom", "message_to_loom"]

METADATA_KEY = "agent_framework"
"""The metadata member of a loom message that holds the framework's Message."""

_VALID_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")
_DATA_URI = re.compile(r"^data:([^;,]*)(;base64)?,(.*)$", re.DOTALL)


class LoomHistoryProvider(HistoryProvider):
    """LoomHistoryProvider keeps each session's history in a loom thread of
    loom serve at url. The flags are HistoryProvider's (load_messages,
    store_inputs, store_outputs, ...); title, when set, names new threads."""

    DEFAULT_SOURCE_ID: ClassVar[str] = "loom"

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        source_id: str | None = None,
        title: str | None = None,
        load_messages: bool = True,
        store_inputs: bool = True,
        store_context_messages: bool = False,
        store_context_from: set[str] | None = None,
        store_outputs: bool = True,
    ) -> None:
        super().__init__(
            source_id or self.DEFAULT_SOURCE_ID,
            load_messages=load_messages,
            store_inputs=store_inputs,
            store_context_messages=store_context_messages,
            store_context_from=store_context_from,
            store_outputs=store_outputs,
        )
        self.url = url
        self.title = title
        self._api_key = api_key
        # An httpx.AsyncClient's connections belong to the loop that made
        # them: one client per event loop.
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncClient] = (
            weakref.WeakKeyDictionary()
        )

    def _client(self) -> AsyncClient:
        loop = asyncio.get_running_loop()
        c = self._clients.get(loop)
        if c is None:
            c = AsyncClient(self.url, api_key=self._api_key)
            self._clients[loop] = c
        return c

    async def aclose(self) -> None:
        """aclose closes the running loop's connections to loom."""
        c = self._clients.pop(asyncio.get_running_loop(), None)
        if c is not None:
            await c.aclose()

    # Where a session's thread is.

    def thread_id(self, session: AgentSession) -> str | None:
        """thread_id: the loom thread that keeps session's history, or None
        when the session has neither run nor a valid-id session_id."""
        return _thread_of(session.session_id, session.state.get(self.source_id))

    # HistoryProvider.

    async def get_messages(
        self, session_id: str | None, *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Message]:
        """get_messages: the session thread's messages, oldest first; none
        when the thread does not exist yet."""
        tid = _thread_of(session_id, state)
        if tid is None:
            return []
        try:
            raw = await self._client().messages(tid)
        except LoomError as e:
            if e.status == 404:
                return []
            raise
        if state is not None:
            state["thread_id"] = tid
        return [message_from_loom(m) for m in raw]

    async def save_messages(
        self,
        session_id: str | None,
        messages: Sequence[Message],
        *,
        state: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """save_messages appends messages to the session's thread in one
        commit, making the thread on the first turn."""
        if not messages:
            return
        wire = [message_to_loom(m) for m in messages]
        client = self._client()
        tid = _thread_of(session_id, state)
        known = state is not None and "thread_id" in state
        if tid is None or not known:
            try:
                th = await client.create_thread(id=tid, title=self.title, messages=wire)
                tid = str(th["id"])
            except LoomError as e:
                # The session's thread exists (its state was not saved after
                # an earlier turn): append to it.
                if e.status != 409 or tid is None:
                    raise
                await client.append_messages(tid, wire)
        else:
            await client.append_messages(tid, wire)
        if state is not None:
            state["thread_id"] = tid

    # What loom adds.

    async def fork(self, session: AgentSession) -> AgentSession:
        """fork: a new session whose thread is a loom fork of session's at
        its latest version; both go on independently. The new session is
        session's copy (its other providers' state too) under a new
        session_id."""
        new_id = str(uuid.uuid4())
        data = session.to_dict()
        data["session_id"] = new_id
        state = dict(data.get("state") or {})
        tid = self.thread_id(session)
        if tid is not None:
            try:
                th = await self._client().fork_thread(tid, id=new_id)
                state[self.source_id] = {"thread_id": str(th["id"])}
            except LoomError as e:
                if e.status != 404:
                    raise
                state[self.source_id] = {}
        data["state"] = state
        return AgentSession.from_dict(data)

    async def checkpoint(self, session: AgentSession, name: str) -> None:
        """checkpoint names the session thread's latest version name."""
        await self._client().create_checkpoint(self._existing(session), name)

    async def rollback(self, session: AgentSession, name: str) -> None:
        """rollback returns the session's history to checkpoint name: a new
        version of the thread, so the abandoned turns stay in its history
        and the page."""
        await self._client().rollback(self._existing(session), name)

    def _existing(self, session: AgentSession) -> str:
        tid = self.thread_id(session)
        if tid is None:
            raise ValueError(f"session {session.session_id} has no loom thread")
        return tid


def _thread_of(session_id: str | None, state: Any) -> str | None:
    if isinstance(state, dict) and isinstance(state.get("thread_id"), str):
        return str(state["thread_id"])
    if session_id is not None and _VALID_ID.match(session_id):
        return session_id
    return None


# The message mapping.


def message_to_loom(m: Message) -> dict[str, Any]:
    """message_to_loom: m in loom's wire format, its contents in loom's
    variants where loom has one, and m whole in metadata.agent_framework."""
    out: dict[str, Any] = {
        "role": str(m.role),
        "contents": [c for c in (_content_to_loom(c) for c in m.contents) if c is not None],
        "metadata": {METADATA_KEY: m.to_dict()},
    }
    if m.author_name:
        out["author_name"] = m.author_name
    return out


def message_from_loom(raw: dict[str, Any]) -> Message:
    """message_from_loom: the framework's Message of a loom message, exact
    when the message was written by message_to_loom."""
    meta = raw.get("metadata") or {}
    kept = meta.get(METADATA_KEY) if isinstance(meta, dict) else None
    if isinstance(kept, dict):
        return Message.from_dict(kept)
    contents = [c for c in (_content_from_loom(c) for c in raw.get("contents") or []) if c is not None]
    props = {"loom": {"id": raw["id"]}} if raw.get("id") else None
    return Message(
        role=raw.get("role") or "user",
        contents=contents,
        author_name=raw.get("author_name"),
        message_id=raw.get("id"),
        additional_properties=props,
    )


def _json_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    return json.dumps(v, ensure_ascii=False, default=str)


def _content_to_loom(c: Content) -> dict[str, Any] | None:
    t = c.type
    if t == "text":
        return {"type": "text", "text": c.text or ""}
    if t == "text_reasoning":
        return {"type": "reasoning", "text": c.text or ""}
    if t == "function_call":
        args = c.arguments
        if isinstance(args, str):
            try:
                json.loads(args or "{}")
            except ValueError:
                return None  # partial arguments: kept in the metadata only
            text = args or "{}"
        else:
            text = json.dumps(args or {}, ensure_ascii=False, default=str)
        return {"type": "function_call", "call_id": c.call_id or "", "name": c.name or "", "arguments": text}
    if t == "function_result":
        out: dict[str, Any] = {"type": "function_result", "call_id": c.call_id or ""}
        if c.exception is not None:
            out["result"] = str(c.exception)
            out["is_error"] = True
        else:
            out["result"] = _json_text(c.result if c.result is not None else "")
        return out
    if t == "data" and c.uri:
        m = _DATA_URI.match(c.uri)
        if m is None:
            return None
        media = c.media_type or m.group(1) or "application/octet-stream"
        if m.group(2):
            data = m.group(3)
        else:
            data = base64.b64encode(m.group(3).encode()).decode()
        return {"type": "data", "media_type": media, "data": data}
    if t == "uri" and c.uri:
        return {"type": "data", "media_type": c.media_type or "application/octet-stream", "uri": c.uri}
    if t == "usage" and c.usage_details:
        u = c.usage_details
        usage: dict[str, Any] = {"type": "usage"}
        for src, dst in (
            ("input_token_count", "input_tokens"),
            ("output_token_count", "output_tokens"),
            ("total_token_count", "total_tokens"),
        ):
            v = u.get(src)
            if isinstance(v, int):
                usage[dst] = v
        return usage
    if t == "error":
        return {"type": "error", "code": c.error_code or "", "message": c.message or ""}
    return None


def _content_from_loom(raw: dict[str, Any]) -> Content | None:
    t = raw.get("type")
    if t == "text":
        return Content.from_text(raw.get("text") or "")
    if t == "reasoning":
        return Content.from_text_reasoning(text=raw.get("text") or "")
    if t == "function_call":
        return Content.from_function_call(
            call_id=raw.get("call_id") or "", name=raw.get("name") or "", arguments=raw.get("arguments") or "{}"
        )
    if t == "function_result":
        return Content.from_function_result(call_id=raw.get("call_id") or "", result=raw.get("result") or "")
    if t == "data":
        media = raw.get("media_type") or "application/octet-stream"
        if raw.get("uri"):
            return Content.from_uri(uri=raw["uri"], media_type=media)
        return Content.from_uri(uri=f"data:{media};base64,{raw.get('data') or ''}", media_type=media)
    if t == "usage":
        return Content.from_usage(
            usage_details={
                "input_token_count": raw.get("input_tokens"),
                "output_token_count": raw.get("output_tokens"),
                "total_token_count": raw.get("total_tokens"),
            }
        )
    if t == "error":
        return Content.from_error(message=raw.get("message"), error_code=raw.get("code"))
    return None
