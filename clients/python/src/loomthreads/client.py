"""A small typed client of loom serve's LangGraph checkpointer routes.

Client (httpx.Client) and AsyncClient (httpx.AsyncClient) have the same
methods, one per route of LG's protocol, each one HTTP request taking and
returning the wire types of loomthreads._types (generated from loom's
OpenAPI document). An error answer raises LoomError with loom's code,
message and the HTTP status.
"""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any, Final, Self, cast
from urllib.parse import quote

import httpx

from loomthreads._types import (
    LangGraphConfig,
    LangGraphCopyRequest,
    LangGraphDeleteRunsRequest,
    LangGraphDeltaRequest,
    LangGraphDeltaResponse,
    LangGraphListRequest,
    LangGraphListResponse,
    LangGraphMessagesSum,
    LangGraphPruneRequest,
    LangGraphPutRequest,
    LangGraphPutResponse,
    LangGraphTuple,
    LangGraphWritesRequest,
)

__all__ = ["AsyncClient", "Client", "LoomError"]

DEFAULT_TIMEOUT: Final = 30.0

# The code loom gives each status, for an error answer that does not carry
# loom's error shape (a proxy's 502, say).
_STATUS_CODES: Final = {
    400: "invalid",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    409: "conflict",
    413: "too_large",
    429: "rate_limited",
    503: "unavailable",
}


class LoomError(Exception):
    """An error answer of loom serve: its code ("not_found", "invalid",
    "conflict", ...), its message and the HTTP status."""

    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(f"loom: {code} ({status}): {message}")
        self.code = code
        self.message = message
        self.status = status

    def __reduce__(self) -> tuple[type[LoomError], tuple[str, str, int]]:
        return (LoomError, (self.code, self.message, self.status))


def error_from_response(status: int, body: bytes) -> LoomError:
    """The LoomError an error answer (status, body) stands for."""
    try:
        doc = json.loads(body)
        detail = doc["error"]
        code, message = detail["code"], detail["message"]
        if isinstance(code, str) and code and isinstance(message, str):
            return LoomError(code, message, status)
    except (ValueError, KeyError, TypeError):
        pass
    text = body.decode("utf-8", "replace").strip()[:200]
    code = _STATUS_CODES.get(status, "server_error" if status >= 500 else "http_error")
    return LoomError(code, text or f"HTTP {status}", status)


def _headers(api_key: str | None) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": "loomthreads-python"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def _base(url: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"loomthreads: url must be http:// or https://, not {url!r}")
    return url.rstrip("/")


def _tuple_params(config: LangGraphConfig, known: LangGraphMessagesSum | None) -> dict[str, str]:
    params = {"thread_id": config["thread_id"], "checkpoint_ns": config.get("checkpoint_ns", "")}
    if config.get("checkpoint_id"):
        params["checkpoint_id"] = config["checkpoint_id"]
    if known is not None:
        params["messages_n"] = str(known["n"])
        params["messages_h"] = known["h"]
    return params


def _thread_path(thread_id: str) -> str:
    return "/v1/langgraph/threads/" + quote(thread_id, safe="")


def _dumps(body: Any) -> str:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _check(resp: httpx.Response) -> httpx.Response:
    if resp.status_code >= 400:
        raise error_from_response(resp.status_code, resp.content)
    return resp


def _json(resp: httpx.Response) -> Any:
    return json.loads(_check(resp).content)


class Client:
    """A synchronous client of loom serve at url (its LangGraph routes).

    Safe for use from several threads at once (httpx.Client is). Close it,
    or use it as a context manager, to close its connections. http_client
    replaces the httpx.Client it would make (its base URL and headers are
    then the caller's to set)."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.url = _base(url)
        self._http = http_client or httpx.Client(
            base_url=self.url, headers=_headers(api_key), timeout=timeout
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _post(self, path: str, body: Any) -> httpx.Response:
        return _check(
            self._http.post(path, content=_dumps(body), headers={"Content-Type": "application/json"})
        )

    def put_checkpoint(self, req: LangGraphPutRequest) -> LangGraphPutResponse:
        """put: stores a checkpoint."""
        return cast(LangGraphPutResponse, _json(self._post("/v1/langgraph/checkpoints", req)))

    def put_writes(self, req: LangGraphWritesRequest) -> None:
        """putWrites: stores the pending writes of a task."""
        self._post("/v1/langgraph/writes", req)

    def get_checkpoint(
        self, config: LangGraphConfig, known: LangGraphMessagesSum | None = None
    ) -> LangGraphTuple | None:
        """getTuple: the checkpoint config names (the latest without
        checkpoint_id), or None when there is none. known names a list of
        messages the caller holds: when the checkpoint's list begins with
        it, the answer has only the rest (and extends)."""
        resp = self._http.get("/v1/langgraph/checkpoint", params=_tuple_params(config, known))
        if resp.status_code == 404:
            err = error_from_response(404, resp.content)
            if err.code == "not_found":
                return None
            raise err
        return cast(LangGraphTuple, _json(resp))

    def list_checkpoints(self, req: LangGraphListRequest) -> LangGraphListResponse:
        """list: the checkpoints req selects, newest first."""
        return cast(LangGraphListResponse, _json(self._post("/v1/langgraph/checkpoints/search", req)))

    def delete_thread(self, thread_id: str) -> None:
        """deleteThread: removes a thread with every namespace."""
        _check(self._http.delete(_thread_path(thread_id)))

    def copy_thread(self, thread_id: str, req: LangGraphCopyRequest) -> None:
        """copyThread: copies thread_id to req's target_thread_id."""
        self._post(_thread_path(thread_id) + "/copy", req)

    def prune(self, req: LangGraphPruneRequest) -> None:
        """prune: keeps each namespace's latest checkpoint, or deletes all."""
        self._post("/v1/langgraph/prune", req)

    def delete_for_runs(self, req: LangGraphDeleteRunsRequest) -> None:
        """deleteForRuns: deletes the checkpoints of the runs."""
        self._post("/v1/langgraph/runs/delete", req)

    def delta_history(self, req: LangGraphDeltaRequest) -> LangGraphDeltaResponse:
        """getDeltaChannelHistory."""
        return cast(LangGraphDeltaResponse, _json(self._post("/v1/langgraph/delta-history", req)))


class AsyncClient:
    """The asynchronous Client (httpx.AsyncClient): the same methods,
    awaited. Its connections belong to the event loop that first uses
    them; LoomSaver keeps one per loop."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = _base(url)
        self._http = http_client or httpx.AsyncClient(
            base_url=self.url, headers=_headers(api_key), timeout=timeout
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _post(self, path: str, body: Any) -> httpx.Response:
        return _check(
            await self._http.post(
                path, content=_dumps(body), headers={"Content-Type": "application/json"}
            )
        )

    async def put_checkpoint(self, req: LangGraphPutRequest) -> LangGraphPutResponse:
        """put: stores a checkpoint."""
        return cast(LangGraphPutResponse, _json(await self._post("/v1/langgraph/checkpoints", req)))

    async def put_writes(self, req: LangGraphWritesRequest) -> None:
        """putWrites: stores the pending writes of a task."""
        await self._post("/v1/langgraph/writes", req)

    async def get_checkpoint(
        self, config: LangGraphConfig, known: LangGraphMessagesSum | None = None
    ) -> LangGraphTuple | None:
        """getTuple: the checkpoint config names (the latest without
        checkpoint_id), or None when there is none. known: as Client's."""
        resp = await self._http.get("/v1/langgraph/checkpoint", params=_tuple_params(config, known))
        if resp.status_code == 404:
            err = error_from_response(404, resp.content)
            if err.code == "not_found":
                return None
            raise err
        return cast(LangGraphTuple, _json(resp))

    async def list_checkpoints(self, req: LangGraphListRequest) -> LangGraphListResponse:
        """list: the checkpoints req selects, newest first."""
        return cast(
            LangGraphListResponse, _json(await self._post("/v1/langgraph/checkpoints/search", req))
        )

    async def delete_thread(self, thread_id: str) -> None:
        """deleteThread: removes a thread with every namespace."""
        _check(await self._http.delete(_thread_path(thread_id)))

    async def copy_thread(self, thread_id: str, req: LangGraphCopyRequest) -> None:
        """copyThread: copies thread_id to req's target_thread_id."""
        await self._post(_thread_path(thread_id) + "/copy", req)

    async def prune(self, req: LangGraphPruneRequest) -> None:
        """prune: keeps each namespace's latest checkpoint, or deletes all."""
        await self._post("/v1/langgraph/prune", req)

    async def delete_for_runs(self, req: LangGraphDeleteRunsRequest) -> None:
        """deleteForRuns: deletes the checkpoints of the runs."""
        await self._post("/v1/langgraph/runs/delete", req)

    async def delta_history(self, req: LangGraphDeltaRequest) -> LangGraphDeltaResponse:
        """getDeltaChannelHistory."""
        return cast(
            LangGraphDeltaResponse, _json(await self._post("/v1/langgraph/delta-history", req))
        )

    # The native thread routes (/v1/threads), as much of them as
    # loomthreads.agent_framework needs. Messages are loom's wire format
    # (docs/wire-format.md) as JSON objects; answers are the decoded JSON.

    async def create_thread(
        self,
        *,
        id: str | None = None,
        title: str | None = None,
        labels: dict[str, str] | None = None,
        messages: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """create_thread: POST /v1/threads; the new thread (409 conflict
        when id is taken)."""
        body: dict[str, Any] = {}
        if id is not None:
            body["id"] = id
        if title is not None:
            body["title"] = title
        if labels:
            body["labels"] = labels
        if messages:
            body["messages"] = messages
        out: dict[str, Any] = _json(await self._post("/v1/threads", body))
        return out

    async def messages(self, thread_id: str, *, page: int = 1000) -> list[dict[str, Any]]:
        """messages: GET /v1/threads/{id}/messages, all of the thread's
        messages at its latest version, oldest first. They come in pages of
        page messages, newest first, each asking for the ones before the
        last (next_before) at the version of the first page, so that a
        write in between changes nothing."""
        if page < 1:
            raise ValueError(f"page {page}: at least 1")
        path = _native_path(thread_id) + "/messages"
        params: dict[str, str | int] = {"limit": page}
        out = _json(await self._http.get(path, params=params))
        pages: list[list[dict[str, Any]]] = [out["messages"]]
        params["version"] = out["version"]
        while before := out.get("next_before"):
            params["before"] = before
            out = _json(await self._http.get(path, params=params))
            pages.append(out["messages"])
        return [m for p in reversed(pages) for m in p]

    async def append_messages(
        self, thread_id: str, messages: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """append_messages: POST /v1/threads/{id}/messages, one commit;
        the answer holds its version, commit and messages."""
        out: dict[str, Any] = _json(
            await self._post(_native_path(thread_id) + "/messages", {"messages": messages})
        )
        return out

    async def fork_thread(self, thread_id: str, *, id: str | None = None) -> dict[str, Any]:
        """fork_thread: POST /v1/threads/{id}/fork at its latest version;
        the new thread, which shares the history up to there."""
        body: dict[str, Any] = {} if id is None else {"id": id}
        out: dict[str, Any] = _json(await self._post(_native_path(thread_id) + "/fork", body))
        return out

    async def create_checkpoint(self, thread_id: str, name: str) -> None:
        """create_checkpoint: POST /v1/threads/{id}/checkpoints, names the
        thread's latest version."""
        await self._post(_native_path(thread_id) + "/checkpoints", {"name": name})

    async def rollback(self, thread_id: str, checkpoint: str) -> None:
        """rollback: POST /v1/threads/{id}/rollback to a named checkpoint
        (a new version whose messages are the checkpoint's)."""
        await self._post(_native_path(thread_id) + "/rollback", {"checkpoint": checkpoint})


def _native_path(thread_id: str) -> str:
    return "/v1/threads/" + quote(thread_id, safe="")
