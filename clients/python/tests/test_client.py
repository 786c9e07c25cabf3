"""The client's errors and the saver's edges, against real servers: loom's
error answers become LoomError with loom's code, message and status; API
keys; writes that reach loom before their checkpoint."""

from __future__ import annotations

import asyncio
import pickle
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

from loomthreads import AsyncClient, Client, LoomError
from loomthreads.client import error_from_response
from loomthreads.langgraph import LoomSaver
from tests.servers import LoomServer


def test_error_from_loom_shape() -> None:
    err = error_from_response(409, b'{"error":{"code":"conflict","message":"target has checkpoints"}}')
    assert (err.code, err.message, err.status) == ("conflict", "target has checkpoints", 409)
    assert "conflict" in str(err) and "409" in str(err)


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (502, b"<html>Bad Gateway</html>", "server_error"),
        (404, b"not json", "not_found"),
        (400, b'{"error":"a string"}', "invalid"),
        (401, b'{"error":{"code":"","message":"x"}}', "unauthorized"),
        (418, b"", "http_error"),
    ],
)
def test_error_without_loom_shape(status: int, body: bytes, code: str) -> None:
    err = error_from_response(status, body)
    assert (err.code, err.status) == (code, status)
    assert err.message


def test_error_pickles() -> None:
    err = pickle.loads(pickle.dumps(LoomError("invalid", "bad", 400)))
    assert (err.code, err.message, err.status) == ("invalid", "bad", 400)


def test_url_must_be_http() -> None:
    with pytest.raises(ValueError):
        Client("localhost:8080")
    with pytest.raises(ValueError):
        LoomSaver(url="ftp://x")


def test_loom_errors(sqlite_server: LoomServer) -> None:
    tid = f"client-{uuid.uuid4()}"
    with Client(sqlite_server.url) as c:
        assert c.get_checkpoint({"thread_id": tid}) is None
        with pytest.raises(LoomError) as e:
            c.put_checkpoint({"config": {"thread_id": ""}, "checkpoint": {"id": "c1"}})
        assert (e.value.code, e.value.status) == ("invalid", 400)
        with pytest.raises(LoomError) as e:
            c.copy_thread(tid, {"target_thread_id": tid + "-copy"})
        assert (e.value.code, e.value.status) == ("not_found", 404)
        c.put_checkpoint({"config": {"thread_id": tid}, "checkpoint": {"id": "c1"}})
        c.put_checkpoint({"config": {"thread_id": tid + "-2"}, "checkpoint": {"id": "c1"}})
        with pytest.raises(LoomError) as e:
            c.copy_thread(tid, {"target_thread_id": tid + "-2"})
        assert (e.value.code, e.value.status) == ("conflict", 409)
        got = c.get_checkpoint({"thread_id": tid})
        assert got is not None and got["config"]["checkpoint_id"] == "c1"


async def test_async_loom_errors(sqlite_server: LoomServer) -> None:
    async with AsyncClient(sqlite_server.url) as c:
        assert await c.get_checkpoint({"thread_id": f"none-{uuid.uuid4()}"}) is None
        with pytest.raises(LoomError) as e:
            await c.prune({"thread_ids": ["x"], "strategy": "everything"})  # type: ignore[typeddict-item]
        assert (e.value.code, e.value.status) == ("invalid", 400)


def test_unreachable_server_is_an_httpx_error() -> None:
    with Client("http://127.0.0.1:9", timeout=2) as c, pytest.raises(httpx.TransportError):
        c.get_checkpoint({"thread_id": "t"})


@pytest.fixture(scope="module")
def keyed_server(loom_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoomServer]:
    keys: Path = tmp_path_factory.mktemp("keys") / "keys"
    keys.write_text("py:loomthreads-test-key-0123456789\n")
    with LoomServer(loom_bin, "memory://", "--keys", str(keys)) as srv:
        yield srv


def test_api_key(keyed_server: LoomServer) -> None:
    tid = f"keyed-{uuid.uuid4()}"
    with LoomSaver(url=keyed_server.url) as anonymous, pytest.raises(LoomError) as e:
        anonymous.get_tuple({"configurable": {"thread_id": tid}})
    assert (e.value.code, e.value.status) == ("unauthorized", 401)
    with LoomSaver(url=keyed_server.url, api_key="wrong") as wrong, pytest.raises(LoomError) as e:
        wrong.delete_thread(tid)
    assert e.value.status == 401
    with LoomSaver(url=keyed_server.url, api_key="loomthreads-test-key-0123456789") as saver:
        cfg = saver.put(
            {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}, empty_checkpoint(), {}, {}
        )
        assert saver.get_tuple(cfg) is not None


def test_writes_wait_for_their_checkpoint(sqlite_server: LoomServer) -> None:
    """LangGraph saves a checkpoint and its tasks' writes in the background,
    so writes can reach loom first: they wait for the saver's put."""
    tid = f"early-{uuid.uuid4()}"
    with LoomSaver(url=sqlite_server.url) as saver:
        cp = empty_checkpoint()
        cfg: RunnableConfig = {"configurable": {"thread_id": tid, "checkpoint_ns": "", "checkpoint_id": cp["id"]}}
        writer = threading.Thread(target=saver.put_writes, args=(cfg, [("x", 1)], "task"))
        writer.start()
        # The writes are refused (not_found) before the put: wait for that
        # round trip to be over, then put.
        deadline = time.monotonic() + 30
        while not saver._order.waiting() and time.monotonic() < deadline:
            time.sleep(0.005)
        assert saver._order.waiting(), "the writes did not wait"
        saver.put({"configurable": {"thread_id": tid, "checkpoint_ns": ""}}, cp, {}, {})
        writer.join(30)
        assert not writer.is_alive()
        tup = saver.get_tuple(cfg)
        assert tup is not None and tup.pending_writes == [("task", "x", 1)]


async def test_async_writes_wait_for_their_checkpoint(sqlite_server: LoomServer) -> None:
    tid = f"aearly-{uuid.uuid4()}"
    async with LoomSaver(url=sqlite_server.url) as saver:
        cp = empty_checkpoint()
        cfg: RunnableConfig = {"configurable": {"thread_id": tid, "checkpoint_ns": "", "checkpoint_id": cp["id"]}}
        writes = asyncio.create_task(saver.aput_writes(cfg, [("x", 1)], "task"))
        deadline = time.monotonic() + 30
        while not saver._order.waiting() and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        assert saver._order.waiting(), "the writes did not wait"
        await saver.aput({"configurable": {"thread_id": tid, "checkpoint_ns": ""}}, cp, {}, {})
        await asyncio.wait_for(writes, 30)
        tup = await saver.aget_tuple(cfg)
        assert tup is not None and tup.pending_writes == [("task", "x", 1)]


def test_writes_for_a_checkpoint_never_put_fail(sqlite_server: LoomServer) -> None:
    with LoomSaver(url=sqlite_server.url, timeout=0.2) as saver, pytest.raises(LoomError) as e:
        cfg: RunnableConfig = {"configurable": {"thread_id": f"never-{uuid.uuid4()}", "checkpoint_ns": "", "checkpoint_id": "nope"}}
        saver.put_writes(cfg, [("x", 1)], "task")
    assert e.value.code == "not_found"


def test_writes_do_not_wait_for_a_put_that_failed(sqlite_server: LoomServer) -> None:
    """A put that fails ends the wait of its checkpoint's writes at once
    (they fail with not_found), rather than at the timeout."""
    tid = f"failed-{uuid.uuid4()}"
    with LoomSaver(url=sqlite_server.url, timeout=20) as saver:
        cfg: RunnableConfig = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
        saver.put(cfg, empty_checkpoint(), {}, {})  # the thread is one the saver puts on
        bad = empty_checkpoint()
        bad["id"] = "\x00bad"
        with pytest.raises(LoomError):
            saver.put(cfg, bad, {}, {})
        t0 = time.monotonic()
        with pytest.raises(LoomError) as e:
            saver.put_writes({"configurable": {**cfg["configurable"], "checkpoint_id": bad["id"]}}, [("x", 1)], "t")
        assert e.value.code in ("not_found", "invalid")
        assert time.monotonic() - t0 < 2


def test_a_put_waits_for_its_parents_writes(sqlite_server: LoomServer) -> None:
    """LangGraph may send a step's writes after the next checkpoint's put;
    the saver holds the put until the writes of its parent are in, so loom
    gets them in the order the run made them."""
    tid = f"order-{uuid.uuid4()}"
    with LoomSaver(url=sqlite_server.url) as saver:
        base: RunnableConfig = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
        parent = saver.put(base, empty_checkpoint(), {}, {})
        sent: list[str] = []
        hold = threading.Event()

        def on_request(req: httpx.Request) -> None:
            sent.append(req.url.path)
            if req.url.path.endswith("/writes"):
                hold.wait(30)

        saver.client._http.event_hooks["request"].append(on_request)
        writer = threading.Thread(target=saver.put_writes, args=(parent, [("x", 1)], "task"))
        child = threading.Thread(target=saver.put, args=(parent, empty_checkpoint(), {}, {}))
        try:
            writer.start()
            deadline = time.monotonic() + 30
            while not sent and time.monotonic() < deadline:
                time.sleep(0.005)
            assert sent == ["/v1/langgraph/writes"]
            child.start()
            child.join(0.5)
            assert child.is_alive() and sent == ["/v1/langgraph/writes"], "the child's put did not wait"
        finally:
            hold.set()
            writer.join(30)
            if child.is_alive():
                child.join(30)
        assert sent == ["/v1/langgraph/writes", "/v1/langgraph/checkpoints"]
        tup = saver.get_tuple(parent)
        assert tup is not None and tup.pending_writes == [("task", "x", 1)]


async def test_messages_pages_back_to_the_first(sqlite_server: LoomServer) -> None:
    """messages reads the whole thread, past the 100 loom answers by
    default, in pages joined oldest first, all at one version: a message
    appended while it reads is not in the answer."""

    def msg(i: int) -> dict[str, object]:
        return {"role": "user", "contents": [{"type": "text", "text": f"m{i}"}]}

    requests: list[httpx.Request] = []
    async with AsyncClient(sqlite_server.url) as c:
        tid = "paged-" + uuid.uuid4().hex
        await c.create_thread(id=tid, messages=[msg(i) for i in range(250)])

        async def log(r: httpx.Request) -> None:
            requests.append(r)
            if len(requests) == 2:  # a write between the pages
                await c.append_messages(tid, [msg(250)])

        c._http.event_hooks["request"] = [log]
        got = await c.messages(tid, page=100)
        assert [m["contents"][0]["text"] for m in got] == [f"m{i}" for i in range(250)]
        assert len(requests) == 4  # three pages and the append
        versions = {r.url.params.get("version") for r in requests[1:] if r.method == "GET"}
        assert len(versions) == 1 and None not in versions, versions
        c._http.event_hooks["request"] = []
        assert len(await c.messages(tid)) == 251
        with pytest.raises(ValueError):
            await c.messages(tid, page=0)
