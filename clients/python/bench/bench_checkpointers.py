#!/usr/bin/env python3
"""Side by side: the chat graph of tests/chat_graph.py for N turns on
LoomSaver (loom serve on SQLite, over HTTP), LangGraph's SqliteSaver (a
file) and PostgresSaver (a throwaway PostgreSQL from pgserve), each through
LangGraph's public API. Not run by the tests.

Each turn is realistic: a user message of about 200 bytes, the model calls
a tool (a result of about 300 bytes), then answers in about 800 bytes.

Reported, as a markdown table: the mean time of a turn (graph.invoke) over
the first 100 and the last 100 turns, of get_state and of a history of 10
(get_state_history limit 10) at the end, the bytes on disk (the SQLite
files, WAL included, for loom — at rest, after loom serve stopped — and SqliteSaver; the sum of
pg_total_relation_size of PostgresSaver's tables) and the raw message
bytes (the sum of len(json.dumps(message_to_dict(m))) over the final
state's messages), and the ratio of the two.

    ./run-tests --version >/dev/null   # makes the venv once
    <venv>/bin/python bench/bench_checkpointers.py --turns 500

Needs Go (to build loom and pgserve, or $LOOM_BIN and $LOOM_PGSERVE) and
PostgreSQL's binaries for PostgresSaver (--no-postgres to leave it out).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent
ROOT = PACKAGE.parent.parent
sys.path.insert(0, str(PACKAGE))

from langchain_core.messages import HumanMessage, message_to_dict  # noqa: E402
from langchain_core.runnables import RunnableConfig  # noqa: E402
from langgraph.checkpoint.base import BaseCheckpointSaver  # noqa: E402

from loomthreads.langgraph import LoomSaver  # noqa: E402
from tests.chat_graph import build  # noqa: E402
from tests.servers import LoomServer, PgServe, build_go  # noqa: E402

USER_BYTES = 200
_USER_FILLER = "Please check the catalogue entry, its dates, its sources, who handled it last, where it is kept now. "


def user_message(turn: int) -> str:
    """About USER_BYTES of a question; no " and " (which the scripted
    model would take for two tool calls)."""
    text = f"Turn {turn}: what does the archive say about item {turn}? "
    return (text + _USER_FILLER * 3)[:USER_BYTES]


@dataclass
class Result:
    name: str
    first: float
    last: float
    get_state: float
    history: float
    disk: int
    raw: int


def run(name: str, saver: BaseCheckpointSaver[Any], turns: int, disk: Callable[[], int]) -> Result:
    graph = build(saver)
    cfg: RunnableConfig = {"configurable": {"thread_id": f"bench-{name}"}}
    times: list[float] = []
    for i in range(1, turns + 1):
        t0 = time.perf_counter()
        graph.invoke({"messages": [HumanMessage(user_message(i))]}, cfg)
        times.append(time.perf_counter() - t0)
        if i % 50 == 0:
            print(f"  {name}: turn {i}, {times[-1] * 1000:.1f} ms", file=sys.stderr)
    gs = []
    for _ in range(20):
        t0 = time.perf_counter()
        state = graph.get_state(cfg)
        gs.append(time.perf_counter() - t0)
    hs = []
    for _ in range(10):
        t0 = time.perf_counter()
        h = list(graph.get_state_history(cfg, limit=10))
        hs.append(time.perf_counter() - t0)
        assert len(h) == 10
    msgs = state.values["messages"]
    assert len(msgs) == 4 * turns, len(msgs)
    raw = sum(len(json.dumps(message_to_dict(m))) for m in msgs)
    n = min(100, turns)
    return Result(
        name,
        statistics.mean(times[:n]),
        statistics.mean(times[-n:]),
        statistics.mean(gs),
        statistics.mean(hs),
        disk(),
        raw,
    )


def files_size(*paths: Path) -> int:
    """The paths' sizes summed; each told on stderr."""
    sizes = {p.name: p.stat().st_size for p in paths if p.exists()}
    print("  " + ", ".join(f"{n}: {b:,} bytes" for n, b in sizes.items()), file=sys.stderr)
    return sum(sizes.values())


@contextmanager
def loom_saver(work: Path, loom_bin: str) -> Iterator[tuple[LoomSaver, Callable[[], int]]]:
    db = work / "loom.db"
    with LoomServer(loom_bin, f"sqlite://{db}") as srv, LoomSaver(url=srv.url) as saver:
        yield saver, lambda: files_size(db, Path(f"{db}-wal"))


@contextmanager
def sqlite_saver(work: Path) -> Iterator[tuple[BaseCheckpointSaver[Any], Callable[[], int]]]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = work / "sqlitesaver.db"
    conn = sqlite3.connect(db, check_same_thread=False)
    try:
        yield SqliteSaver(conn), lambda: files_size(db, Path(f"{db}-wal"))
    finally:
        conn.close()


@contextmanager
def postgres_saver(pgserve: str) -> Iterator[tuple[BaseCheckpointSaver[Any], Callable[[], int]]]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    with PgServe(pgserve, 1) as pg, PostgresSaver.from_conn_string(pg.urls[0]) as saver:
        saver.setup()

        def disk() -> int:
            with psycopg.connect(pg.urls[0]) as conn:
                row = conn.execute(
                    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname LIKE 'checkpoint%'"
                ).fetchone()
                return int(row[0]) if row else 0

        yield saver, disk


def table(results: list[Result], turns: int) -> str:
    n = min(100, turns)
    lines = [
        f"| checkpointer ({turns} turns) | turn, first {n} | turn, last {n} | get_state | history of 10 "
        "| bytes on disk | raw message bytes | disk / raw |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.name} | {r.first * 1000:.1f} ms | {r.last * 1000:.1f} ms | {r.get_state * 1000:.1f} ms "
            f"| {r.history * 1000:.1f} ms | {r.disk:,} | {r.raw:,} | {r.disk / r.raw:,.1f}× |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=500)
    ap.add_argument("--only", choices=["loom", "sqlite", "postgres"], action="append")
    ap.add_argument("--no-postgres", action="store_true")
    args = ap.parse_args()
    only = set(args.only or ["loom", "sqlite", "postgres"])
    if args.no_postgres:
        only.discard("postgres")

    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="loom-bench-") as tmp:
        work = Path(tmp)
        if "loom" in only:
            loom_bin = os.environ.get("LOOM_BIN") or build_go(ROOT, "./cmd/loom", work / "loom")
            with loom_saver(work, loom_bin) as (saver, disk):
                results.append(run("LoomSaver (loom serve, SQLite, HTTP)", saver, args.turns, disk))
            # At rest: loom serve stopped, its WAL folded into the file (as
            # SqliteSaver's rollback journal leaves its file after each
            # commit); the WAL of a running server is up to ~4 MB more.
            db = work / "loom.db"
            results[-1] = replace(results[-1], disk=files_size(db, Path(f"{db}-wal")))
        if "sqlite" in only:
            with sqlite_saver(work) as (saver, disk):
                results.append(run("SqliteSaver", saver, args.turns, disk))
        if "postgres" in only:
            pgserve = os.environ.get("LOOM_PGSERVE") or build_go(
                ROOT, "./internal/testserver/pgserve", work / "pgserve"
            )
            with postgres_saver(pgserve) as (saver, disk):
                results.append(run("PostgresSaver", saver, args.turns, disk))
    print(table(results, args.turns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
