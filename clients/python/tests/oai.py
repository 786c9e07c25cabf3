"""Helpers of the tests of loom's OpenAI-compatible API (/openai/v1): the
SDK clients pointed at a test server, loom's native API beside them, and
short descriptions of items and messages to compare in one assert."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

import httpx
from openai import AsyncOpenAI, OpenAI
from pydantic import BaseModel

from tests.servers import LoomServer

# Response ids are resp_ + 26 id characters + _ + the thread's id (OAI24.md):
# the thread a response was committed to is read from its id.
_RESP_KEY = len("resp_") + 26


def base_url(server: LoomServer) -> str:
    return f"{server.url}/openai/v1"


def sync_client(server: LoomServer, api_key: str = "loom") -> OpenAI:
    """The official SDK at loom, without retries: a retried 409 or 500 would
    hide what loom answered the first time."""
    return OpenAI(base_url=base_url(server), api_key=api_key, max_retries=0)


def async_client(server: LoomServer, api_key: str = "loom") -> AsyncOpenAI:
    return AsyncOpenAI(base_url=base_url(server), api_key=api_key, max_retries=0)


def native(server: LoomServer, api_key: str | None = None) -> httpx.Client:
    """loom's own HTTP API (/v1), to see what the compatible API wrote."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(base_url=server.url, headers=headers, timeout=30)


def get_json(c: httpx.Client, path: str, **params: Any) -> Any:
    r = c.get(path, params=params)
    assert r.status_code == 200, (path, r.status_code, r.text)
    return r.json()


def thread_of(response_id: str) -> str:
    """The loom thread a response lives on."""
    assert response_id.startswith("resp_") and response_id[_RESP_KEY] == "_", response_id
    return response_id[_RESP_KEY + 1 :]


def messages(c: httpx.Client, thread_id: str, version: int = 0) -> list[tuple[str, ...]]:
    """A thread's messages as loom stores them, each (role, content, ...)
    with a content described by describe_content."""
    params: dict[str, Any] = {"limit": 0}  # all of them, not the newest 100
    if version:
        params["version"] = version
    body = get_json(c, f"/v1/threads/{thread_id}/messages", **params)
    return [(m["role"], *(describe_content(p) for p in m["contents"])) for m in body["messages"]]


def describe_content(p: dict[str, Any]) -> str:
    match p["type"]:
        case "text":
            return str(p["text"])
        case "function_call":
            return f"call {p['name']} {json.dumps(json.loads(p['arguments']), sort_keys=True)}"
        case "function_result":
            return f"result {p['result']}"
        case other:
            return str(other)


def describe(item: object) -> tuple[str, ...]:
    """An item of the Conversations or Responses API (an SDK model or a
    plain dict as the Agents SDK keeps them) as (kind, what it says)."""
    d: dict[str, Any] = item.model_dump() if isinstance(item, BaseModel) else dict(cast(Mapping[str, Any], item))
    kind = d.get("type") or "message"
    match kind:
        case "message":
            content = d["content"]
            text = content if isinstance(content, str) else "".join(p.get("text") or "" for p in content)
            return (str(d["role"]), text)
        case "function_call":
            return ("function_call", str(d["name"]), json.dumps(json.loads(d["arguments"]), sort_keys=True))
        case "function_call_output":
            return ("function_call_output", str(d["output"]))
        case other:
            return (str(other),)


__all__ = [
    "async_client",
    "base_url",
    "describe",
    "describe_content",
    "get_json",
    "messages",
    "native",
    "sync_client",
    "thread_of",
]
