"""LoomSaver: a LangGraph checkpointer kept by loom serve.

    from loomthreads.langgraph import LoomSaver
    graph = builder.compile(checkpointer=LoomSaver(url="http://127.0.0.1:8080"))

Every method, sync and async, is one HTTP request to loom serve's LangGraph
routes (two in the rare cases said at put and put_writes). Channel values go
through the saver's serde (dumps_typed) as blobs, except the channel named
"messages": its LangChain messages go as themselves, and loom stores each
message once, however many checkpoints hold it, which is what keeps a long
thread's storage linear in its length. Versions are the base class's
integers (get_next_version).

A turn sends what it adds, not the thread: the saver remembers the message
lists of the last checkpoints it put or got on each thread (_lists), and a
put whose list begins with its parent's very message objects sends only the
rest (loom answers 409 when its parent's list is another, and the whole list
goes again); a get names the list the saver holds and receives the rest,
rebuilt from the same objects. So a message already checkpointed is taken
as unchanged while it is the same object: LangGraph replaces messages (by
id, with add_messages), it does not edit them in place, and neither should
a node.

langgraph-checkpoint and langchain-core are peer dependencies: install them
with LangGraph (or `pip install loomthreads[langgraph]`).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, cast

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from loomthreads._lists import Known, KnownLists
from loomthreads._order import PutOrder, key
from loomthreads._types import (
    LangGraphConfig,
    LangGraphDeltaRequest,
    LangGraphDeltaResponse,
    LangGraphListRequest,
    LangGraphMessagesSum,
    LangGraphPendingWrite,
    LangGraphPutRequest,
    LangGraphPutRequestCheckpoint,
    LangGraphPutResponse,
    LangGraphTuple,
    LangGraphValue,
    LangGraphWritesRequest,
)
from loomthreads._values import MESSAGES, MessageCodec, decode, encode
from loomthreads.client import DEFAULT_TIMEOUT, AsyncClient, Client, LoomError

__all__ = ["LoomError", "LoomSaver"]

class LoomSaver(BaseCheckpointSaver[int]):
    """A BaseCheckpointSaver on loom serve at url (api_key when it runs
    with --keys).

    Safe for use from several threads and event loops at once: the sync
    methods share one httpx.Client; the async ones use an httpx.AsyncClient
    per event loop (connections cannot move between loops). Use it as a
    context manager (with or async with), or call close/aclose, to close
    them."""

    def __init__(
        self,
        url: str = "http://127.0.0.1:8080",
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.url = url
        self._api_key = api_key
        self._timeout = timeout
        self._lock = threading.Lock()
        self._client: Client | None = None
        self._aclients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncClient] = (
            weakref.WeakKeyDictionary()
        )
        self._codec = MessageCodec()
        self._lists = KnownLists()
        self._order = PutOrder(timeout)
        _check_url(url)

    # --- clients ---------------------------------------------------------

    @property
    def client(self) -> Client:
        """The sync client, made on first use."""
        with self._lock:
            if self._client is None:
                self._client = Client(self.url, api_key=self._api_key, timeout=self._timeout)
            return self._client

    @property
    def aclient(self) -> AsyncClient:
        """The running event loop's async client, made on first use."""
        loop = asyncio.get_running_loop()
        with self._lock:
            c = self._aclients.get(loop)
            if c is None:
                c = AsyncClient(self.url, api_key=self._api_key, timeout=self._timeout)
                self._aclients[loop] = c
            return c

    def close(self) -> None:
        """Closes the sync client (async clients: aclose)."""
        with self._lock:
            c, self._client = self._client, None
        if c is not None:
            c.close()

    async def aclose(self) -> None:
        """Closes the sync client and the running loop's async client, and
        forgets those of other loops."""
        self.close()
        loop = asyncio.get_running_loop()
        with self._lock:
            c = self._aclients.pop(loop, None)
            self._aclients.clear()
        if c is not None:
            await c.aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- the wire --------------------------------------------------------

    def _put_request(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        *,
        extend: bool = True,
    ) -> tuple[LangGraphPutRequest, list[BaseMessage] | None, bool]:
        """The put's request, the messages list it sends as messages (None:
        none), and whether it sends only their new part (extends)."""
        cfg = _config(config)
        header = cast(
            LangGraphPutRequestCheckpoint,
            {k: v for k, v in checkpoint.items() if k != "channel_values"},
        )
        values = checkpoint["channel_values"]
        wire: dict[str, LangGraphValue] = {}
        sent: list[BaseMessage] | None = None
        extended = False
        for ch in new_versions:
            if ch not in values:
                continue
            v = values[ch]
            if ch == MESSAGES and extend and "checkpoint_id" in cfg:
                parent = self._lists.get(cfg["thread_id"], cfg.get("checkpoint_ns", ""), cfg["checkpoint_id"])
                if parent is not None and parent.begins(v):
                    rest = self._codec.stored(v[parent.n :], empty=True)
                    if rest is not None:
                        wire[ch] = {"messages": rest, "extends": parent.sum()}
                        sent, extended = list(v), True
                        continue
            wire[ch] = encode(self.serde, ch, v, self._codec)
            if ch == MESSAGES and "messages" in wire[ch]:
                sent = list(v)
        req: LangGraphPutRequest = {
            "config": cfg,
            "checkpoint": header,
            "metadata": dict(get_serializable_checkpoint_metadata(config, metadata)),
            "new_versions": dict(new_versions),
            "channel_values": wire,
        }
        return req, sent, extended

    def _after_put(
        self, req: LangGraphPutRequest, sent: list[BaseMessage] | None, resp: LangGraphPutResponse
    ) -> RunnableConfig:
        """Remembers the new checkpoint's list; its config."""
        c = resp["config"]
        s = resp.get("messages")
        if s is not None:
            tid, ns = c["thread_id"], c.get("checkpoint_ns", "")
            known: Known | None = None
            if sent is not None:
                known = Known(sent, s["n"], s["h"])
            elif "checkpoint_id" in req["config"]:
                # The list did not move: it is the parent's.
                parent = self._lists.get(tid, ns, req["config"]["checkpoint_id"])
                if parent is not None and (parent.n, parent.h) == (s["n"], s["h"]):
                    known = parent
            if known is not None and "checkpoint_id" in c:
                self._lists.remember(tid, ns, c["checkpoint_id"], known)
        return _runnable(c)

    def _writes_request(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> LangGraphWritesRequest:
        return {
            "config": _config(config),
            "task_id": task_id,
            "task_path": task_path,
            "writes": [
                {
                    "idx": WRITES_IDX_MAP.get(ch, i),
                    "channel": ch,
                    "value": encode(self.serde, ch, v, self._codec),
                }
                for i, (ch, v) in enumerate(writes)
            ],
        }

    def _tuple(self, t: LangGraphTuple, earlier: Sequence[Any] = ()) -> CheckpointTuple:
        """The CheckpointTuple of t; earlier holds the message lists of the
        answer's earlier tuples (for shares)."""
        checkpoint = cast(dict[str, Any], dict(t["checkpoint"]))
        c = t["config"]
        values: dict[str, Any] = {}
        for ch, v in t["checkpoint"]["channel_values"].items():
            if ch == MESSAGES and "messages" in v:
                values[ch] = self._messages(c, v, earlier)
            else:
                values[ch] = decode(self.serde, v)
        checkpoint["channel_values"] = values
        self._order.seen(c)
        parent = t["parent_config"]
        return CheckpointTuple(
            config=_runnable(c),
            checkpoint=cast(Checkpoint, checkpoint),
            metadata=cast(CheckpointMetadata, t["metadata"]),
            parent_config=_runnable(parent) if parent is not None else None,
            pending_writes=[self._write(w) for w in t["pending_writes"]],
        )

    def _messages(self, c: LangGraphConfig, v: LangGraphValue, earlier: Sequence[Any]) -> list[BaseMessage]:
        """A checkpoint's messages list from its wire value: the rest after
        a list this saver holds (extends) or an earlier tuple's (shares),
        or all of it. Remembers it by its sum."""
        tid, ns = c["thread_id"], c.get("checkpoint_ns", "")
        rest: list[BaseMessage] = decode(self.serde, v)
        if "extends" in v:
            base = self._lists.find(tid, ns, v["extends"])
            if base is None:
                raise LoomError("invalid", "loom answered a list of messages this saver does not hold", 200)
            msgs = base.messages + rest
        elif "shares" in v:
            share = v["shares"]
            i, n = share["tuple"], share["n"]
            prior = earlier[i] if 0 <= i < len(earlier) else None
            if not isinstance(prior, list) or len(prior) < n:
                raise LoomError("invalid", f"loom answered a share of tuple {i} it did not give", 200)
            msgs = prior[:n] + rest
        else:
            msgs = rest
        if "sum" in v and "checkpoint_id" in c:
            # A copy: the list given to LangGraph is its to change.
            self._lists.remember(tid, ns, c["checkpoint_id"], Known(list(msgs), v["sum"]["n"], v["sum"]["h"]))
        return msgs

    def _tuples(self, ts: Sequence[LangGraphTuple]) -> list[CheckpointTuple]:
        """The tuples of a list answer, in order, each messages list
        rebuilt from the earlier ones it shares."""
        out: list[CheckpointTuple] = []
        lists: list[Any] = []
        for t in ts:
            tup = self._tuple(t, lists)
            out.append(tup)
            lists.append(tup.checkpoint["channel_values"].get(MESSAGES))
        return out

    def _known(self, cfg: LangGraphConfig) -> LangGraphMessagesSum | None:
        k = self._lists.last(cfg["thread_id"], cfg.get("checkpoint_ns", ""))
        return k.sum() if k is not None else None

    def _write(self, w: LangGraphPendingWrite) -> PendingWrite:
        return (w["task_id"], w["channel"], decode(self.serde, w["value"]))

    def _delta(self, resp: LangGraphDeltaResponse) -> dict[str, DeltaChannelHistory]:
        out: dict[str, DeltaChannelHistory] = {}
        for ch, h in resp["channels"].items():
            entry: DeltaChannelHistory = {"writes": [self._write(w) for w in h["writes"]]}
            if "seed" in h:
                entry["seed"] = decode(self.serde, h["seed"])
            out[ch] = entry
        return out

    # --- sync ------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        cfg = _config(config)
        t = self.client.get_checkpoint(cfg, self._known(cfg))
        return self._tuple(t) if t is not None else None

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        if limit is not None and limit <= 0:
            # LangGraph's savers give nothing for limit 0; loom's 0 is "no limit".
            return iter([])
        resp = self.client.list_checkpoints(_list_request(config, filter, before, limit))
        return iter(self._tuples(resp["checkpoints"]))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        req, sent, extended = self._put_request(config, checkpoint, metadata, new_versions)
        if "checkpoint_id" in req["config"]:
            self._order.wait_writes(key(req["config"]))
        self._order.started(req["config"])
        done = None
        try:
            try:
                resp = self.client.put_checkpoint(req)
            except LoomError as e:
                if e.code not in ("conflict", "not_found") or not extended:
                    raise
                # The parent's list is not the one this saver holds: send it all.
                req, sent, _ = self._put_request(config, checkpoint, metadata, new_versions, extend=False)
                resp = self.client.put_checkpoint(req)
            done = resp["config"]
            return self._after_put(req, sent, resp)
        finally:
            self._order.ended(req["config"], done, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        req = self._writes_request(config, writes, task_id, task_path)
        k = key(req["config"])
        self._order.writing(k, 1)
        try:
            self._order.wait(k, after_miss=False)
            try:
                self.client.put_writes(req)
            except LoomError as e:
                if e.code != "not_found" or not self._order.wait(k, after_miss=True):
                    raise
                self.client.put_writes(req)
        finally:
            self._order.writing(k, -1)

    def delete_thread(self, thread_id: str) -> None:
        self._lists.forget(str(thread_id))
        self.client.delete_thread(str(thread_id))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.client.copy_thread(str(source_thread_id), {"target_thread_id": str(target_thread_id)})

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for t in thread_ids:
            self._lists.forget(str(t))
        self.client.prune({"thread_ids": [str(t) for t in thread_ids], "strategy": _strategy(strategy)})

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._lists.clear()
        self.client.delete_for_runs({"run_ids": [str(r) for r in run_ids]})

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        if not channels:
            return {}
        return self._delta(self.client.delta_history(_delta_request(config, channels)))

    # --- async -----------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        cfg = _config(config)
        t = await self.aclient.get_checkpoint(cfg, self._known(cfg))
        return self._tuple(t) if t is not None else None

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        if limit is not None and limit <= 0:
            return
        resp = await self.aclient.list_checkpoints(_list_request(config, filter, before, limit))
        for t in self._tuples(resp["checkpoints"]):
            yield t

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        req, sent, extended = self._put_request(config, checkpoint, metadata, new_versions)
        if "checkpoint_id" in req["config"]:
            await self._order.await_writes(key(req["config"]))
        self._order.started(req["config"])
        done = None
        try:
            try:
                resp = await self.aclient.put_checkpoint(req)
            except LoomError as e:
                if e.code not in ("conflict", "not_found") or not extended:
                    raise
                req, sent, _ = self._put_request(config, checkpoint, metadata, new_versions, extend=False)
                resp = await self.aclient.put_checkpoint(req)
            done = resp["config"]
            return self._after_put(req, sent, resp)
        finally:
            self._order.ended(req["config"], done, checkpoint["id"])

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        req = self._writes_request(config, writes, task_id, task_path)
        k = key(req["config"])
        self._order.writing(k, 1)
        try:
            await self._order.await_(k, after_miss=False)
            try:
                await self.aclient.put_writes(req)
            except LoomError as e:
                if e.code != "not_found" or not await self._order.await_(k, after_miss=True):
                    raise
                await self.aclient.put_writes(req)
        finally:
            self._order.writing(k, -1)

    async def adelete_thread(self, thread_id: str) -> None:
        self._lists.forget(str(thread_id))
        await self.aclient.delete_thread(str(thread_id))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self.aclient.copy_thread(
            str(source_thread_id), {"target_thread_id": str(target_thread_id)}
        )

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for t in thread_ids:
            self._lists.forget(str(t))
        await self.aclient.prune(
            {"thread_ids": [str(t) for t in thread_ids], "strategy": _strategy(strategy)}
        )

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._lists.clear()
        await self.aclient.delete_for_runs({"run_ids": [str(r) for r in run_ids]})

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        if not channels:
            return {}
        return self._delta(await self.aclient.delta_history(_delta_request(config, channels)))


def _config(config: RunnableConfig) -> LangGraphConfig:
    """The wire config of a RunnableConfig's configurable."""
    c = config.get("configurable") or {}
    if "thread_id" not in c:
        raise ValueError("LoomSaver: config['configurable'] needs a thread_id")
    out: LangGraphConfig = {
        "thread_id": str(c["thread_id"]),
        "checkpoint_ns": str(c.get("checkpoint_ns") or ""),
    }
    cid = get_checkpoint_id(config)
    if cid:
        out["checkpoint_id"] = str(cid)
    return out


def _runnable(c: LangGraphConfig) -> RunnableConfig:
    configurable: dict[str, Any] = {
        "thread_id": c["thread_id"],
        "checkpoint_ns": c.get("checkpoint_ns", ""),
    }
    if "checkpoint_id" in c:
        configurable["checkpoint_id"] = c["checkpoint_id"]
    return {"configurable": configurable}


def _list_request(
    config: RunnableConfig | None,
    filter: dict[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
) -> LangGraphListRequest:
    req: LangGraphListRequest = {}
    c = (config or {}).get("configurable") or {}
    if c.get("thread_id") is not None:
        req["thread_id"] = str(c["thread_id"])
    if c.get("checkpoint_ns") is not None:
        req["checkpoint_ns"] = str(c["checkpoint_ns"])
    if c.get("checkpoint_id"):
        req["checkpoint_id"] = str(c["checkpoint_id"])
    if filter:
        req["filter"] = dict(filter)
    if before is not None and (bid := get_checkpoint_id(before)):
        req["before"] = str(bid)
    if limit is not None:
        req["limit"] = limit
    return req


def _delta_request(config: RunnableConfig, channels: Sequence[str]) -> LangGraphDeltaRequest:
    return {"config": _config(config), "channels": list(channels)}


def _check_url(url: str) -> None:
    """Fails early on a bad url, not at the first checkpoint."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"LoomSaver: url must be http:// or https://, not {url!r}")


def _strategy(strategy: str) -> Any:
    if strategy not in ("keep_latest", "delete"):
        raise ValueError(f"LoomSaver.prune: unknown strategy {strategy!r}")
    return strategy
