"""LangGraph's own conformance suite (langgraph-checkpoint-conformance,
pinned) against LoomSaver, with loom serve on SQLite and on PostgreSQL:
every capability, base and extended, must be detected and pass.

The suite calls the async methods only; it runs a second time through
SyncPath, whose async methods call LoomSaver's sync ones (in a worker
thread), so that both halves of the saver meet the same suite."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import Capability

from loomthreads.langgraph import LoomSaver
from tests.servers import LoomServer


class SyncPath(LoomSaver):
    """LoomSaver whose async methods are its sync ones, run in a thread."""

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        tuples = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for t in tuples:
            yield t

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(lambda: self.prune(thread_ids, strategy=strategy))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)


@pytest.mark.parametrize("saver_class", [LoomSaver, SyncPath], ids=["async", "sync"])
async def test_conformance(server: LoomServer, saver_class: type[LoomSaver]) -> None:
    name = f"{saver_class.__name__}({server.store.split(':')[0]})"

    @checkpointer_test(name=name)
    async def loom_saver() -> AsyncGenerator[LoomSaver, None]:
        async with saver_class(url=server.url) as saver:
            yield saver

    report = await validate(loom_saver)
    report.print_report()
    print(name, {c: (r.tests_passed, r.tests_failed) for c, r in sorted(report.results.items())})
    assert set(report.results) == {c.value for c in Capability}
    failures = {c: r.failures for c, r in report.results.items() if not (r.detected and r.passed)}
    assert not failures, f"capabilities not detected or failing: {failures}"
    for cap, r in report.results.items():
        assert r.tests_passed > 0 and r.tests_failed == 0, (cap, r)
    assert report.passed_all()
