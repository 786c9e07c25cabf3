#!/usr/bin/env python3
"""Latency of loom's OpenAI-compatible items API against loom's own: one
item appended, and one page of 20 items listed, through

- the official `openai` SDK at /openai/v1 (conversations.items.create/list),
- plain httpx at /openai/v1 (the same requests, without the SDK's work),
- plain httpx at loom's native /v1/threads/{id}/messages (POST, GET ?limit=20),
- and, to tell the SDK's own work from the server's, the `openai` SDK against
  no server: an httpx2 MockTransport that answers each request with the body
  loom gave for it (what is left is building the request and parsing the
  answer into the SDK's models),

each on its own thread of the same loom serve (SQLite in a temporary
directory, or --store), filled with the same number of items first. The
three are run in turn, one request each, so that drift hits them alike.
Printed: the median and p90 in milliseconds and the ratio of each median
to the native one. Not run by the tests.

    ./run-tests --version >/dev/null   # makes the venv once
    <venv>/bin/python bench/bench_openai.py --n 500

Needs Go to build loom (or $LOOM_BIN).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent
ROOT = PACKAGE.parent.parent
sys.path.insert(0, str(PACKAGE))

import httpx  # noqa: E402
import httpx2  # noqa: E402
from openai import OpenAI  # noqa: E402

from tests.servers import LoomServer, build_go  # noqa: E402

TEXT = "A user message of about a hundred bytes, as a chat turn would send it to a thread kept by loom."


def timed(f: Callable[[], Any]) -> float:
    start = time.perf_counter()
    f()
    return (time.perf_counter() - start) * 1000


def report(name: str, samples: dict[str, list[float]]) -> None:
    base = statistics.median(samples["native /v1"])
    print(f"\n{name}")
    print(f"| {'through':<22} | median ms | p90 ms | vs native |")
    print(f"|{'-' * 24}|-----------|--------|-----------|")
    for how, xs in samples.items():
        med = statistics.median(xs)
        p90 = statistics.quantiles(xs, n=10)[-1]
        print(f"| {how:<22} | {med:9.3f} | {p90:6.3f} | {med / base:8.2f}× |")


def run(url: str, n: int, fill: int) -> None:
    sdk = OpenAI(base_url=f"{url}/openai/v1", api_key="loom", max_retries=0)
    raw = httpx.Client(base_url=f"{url}/openai/v1", timeout=30)
    loom = httpx.Client(base_url=url, timeout=30)

    def ok(r: httpx.Response) -> httpx.Response:
        r.raise_for_status()
        return r

    conv_sdk = sdk.conversations.create().id
    # The last answer loom gave to each kind of request, replayed by the
    # server-less SDK client.
    replay: dict[str, bytes] = {}

    def answer(req: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=replay[req.method], headers={"content-type": "application/json"})

    offline = OpenAI(
        base_url=f"{url}/openai/v1",
        api_key="loom",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(answer)),
    )
    conv_raw = sdk.conversations.create().id
    thread = ok(loom.post("/v1/threads", json={})).json()["id"]
    item = {"role": "user", "content": TEXT}
    native_msg = {"role": "user", "contents": [{"type": "text", "text": TEXT}]}
    for start in range(0, fill, 100):
        k = min(100, fill - start)
        sdk.conversations.items.create(conv_sdk, items=[{"role": "user", "content": TEXT}] * k)
        ok(raw.post(f"/conversations/{conv_raw}/items", json={"items": [item] * k}))
        ok(loom.post(f"/v1/threads/{thread}/messages", json={"messages": [native_msg] * k}))

    kinds = ["openai SDK /openai/v1", "httpx /openai/v1", "native /v1", "openai SDK, no server"]
    create: dict[str, list[float]] = {k: [] for k in kinds}
    listing: dict[str, list[float]] = {k: [] for k in kinds}
    replay["POST"] = ok(raw.post(f"/conversations/{conv_raw}/items", json={"items": [item]})).content
    replay["GET"] = ok(raw.get(f"/conversations/{conv_raw}/items", params={"limit": 20})).content
    for _ in range(n):
        create["openai SDK /openai/v1"].append(
            timed(lambda: sdk.conversations.items.create(conv_sdk, items=[{"role": "user", "content": TEXT}]))
        )
        create["httpx /openai/v1"].append(timed(lambda: ok(raw.post(f"/conversations/{conv_raw}/items", json={"items": [item]}))))
        create["native /v1"].append(
            timed(lambda: ok(loom.post(f"/v1/threads/{thread}/messages", json={"messages": [native_msg]})))
        )
        create["openai SDK, no server"].append(
            timed(lambda: offline.conversations.items.create(conv_sdk, items=[{"role": "user", "content": TEXT}]))
        )
    for _ in range(n):
        listing["openai SDK /openai/v1"].append(timed(lambda: sdk.conversations.items.list(conv_sdk, limit=20)))
        listing["httpx /openai/v1"].append(
            timed(lambda: ok(raw.get(f"/conversations/{conv_raw}/items", params={"limit": 20})))
        )
        listing["native /v1"].append(
            timed(lambda: ok(loom.get(f"/v1/threads/{thread}/messages", params={"limit": 20})))
        )
        listing["openai SDK, no server"].append(timed(lambda: offline.conversations.items.list(conv_sdk, limit=20)))
    print(f"loom serve at {url}; {fill} items first, then {n} requests of each")
    report("Append one item", create)
    report("List 20 items (newest first for /openai/v1, the last 20 for /v1)", listing)
    sdk.close()
    offline.close()
    raw.close()
    loom.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=300, help="requests of each kind (default 300)")
    ap.add_argument("--fill", type=int, default=200, help="items in each thread before timing (default 200)")
    ap.add_argument("--store", help="loom serve --store (default: SQLite in a temporary directory)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        binary = os.environ.get("LOOM_BIN") or build_go(ROOT, "./cmd/loom", Path(d) / "loom")
        with LoomServer(binary, args.store or f"sqlite://{d}/loom.db") as srv:
            run(srv.url, args.n, args.fill)


if __name__ == "__main__":
    main()
