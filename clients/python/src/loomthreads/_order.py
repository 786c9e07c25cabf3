"""Writes that would overtake their checkpoint.

LangGraph saves a checkpoint in the background and runs the next step's
tasks meanwhile; a task's writes, also saved in the background, can reach
loom before the checkpoint they belong to, and loom, which keeps a
checkpoint's writes with it, answers not_found. (SQL savers keep writes in a
table of their own and never notice.) So a saver counts the puts it has in
flight on each thread and namespace and remembers the checkpoints it put:

- before sending writes for a checkpoint it has neither put nor read, on a
  thread and namespace where it has a put in flight or has put before, it
  waits for that checkpoint's put (LangGraph has submitted it: its thread
  may just not have started yet), at most GRACE;
- writes that still get not_found wait for their checkpoint's put and go
  once more, at most the saver's timeout.

Writes for a checkpoint nobody puts still fail with not_found.

The other way round, LangGraph may send a step's writes after the next
checkpoint's put (each goes in the background once submitted); a put waits
for the writes this saver is sending for its parent, so that loom takes a
checkpoint's writes before its child, as a run made them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable

from loomthreads._types import LangGraphConfig

# How many of the checkpoints it put or read a saver remembers, and of the
# threads it put on.
RECENT_PUTS = 4096
ACTIVE_THREADS = 1024

# The longest writes wait before they are sent for a put they expect.
GRACE = 5.0

Key = tuple[str, str, str]
_Thread = tuple[str, str]


def key(c: LangGraphConfig) -> Key:
    return (c["thread_id"], c.get("checkpoint_ns", ""), c.get("checkpoint_id", ""))


class PutOrder:
    """The puts in flight and done, and the writes waiting on them; safe
    for threads and event loops alike."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._lock = threading.Lock()
        self._inflight: Counter[_Thread] = Counter()
        self._recent: OrderedDict[Key, None] = OrderedDict()
        self._active: OrderedDict[_Thread, None] = OrderedDict()
        self._failed: OrderedDict[Key, None] = OrderedDict()
        self._writing: Counter[Key] = Counter()
        self._waiters: dict[_Thread, list[Callable[[], None]]] = {}

    def started(self, c: LangGraphConfig) -> None:
        with self._lock:
            self._inflight[key(c)[:2]] += 1

    def ended(self, c: LangGraphConfig, put: LangGraphConfig | None, failed: str = "") -> None:
        """A put on c's thread ended; put names the checkpoint it stored
        (None: it failed to store the checkpoint of id failed)."""
        t = key(c)[:2]
        with self._lock:
            self._inflight[t] -= 1
            if self._inflight[t] <= 0:
                del self._inflight[t]
            if put is not None:
                self._remember(key(put))
                self._active[t] = None
                self._active.move_to_end(t)
                while len(self._active) > ACTIVE_THREADS:
                    self._active.popitem(last=False)
            elif failed:
                self._failed[(*t, failed)] = None
                while len(self._failed) > RECENT_PUTS:
                    self._failed.popitem(last=False)
            wake = self._waiters.pop(t, [])
        for f in wake:
            f()

    def _remember(self, k: Key) -> None:
        self._recent[k] = None
        self._recent.move_to_end(k)
        while len(self._recent) > RECENT_PUTS:
            self._recent.popitem(last=False)

    def seen(self, c: LangGraphConfig) -> None:
        """A checkpoint read from loom: it exists, writes need not wait."""
        with self._lock:
            self._remember(key(c))

    def waiting(self) -> int:
        """How many writes wait (for tests)."""
        with self._lock:
            return sum(len(w) for w in self._waiters.values())

    def writing(self, k: Key, n: int) -> None:
        """Writes for checkpoint k start (n=1) or end (n=-1)."""
        with self._lock:
            self._writing[k] += n
            if self._writing[k] <= 0:
                del self._writing[k]
            wake = self._waiters.pop(k[:2], []) if n < 0 else []
        for f in wake:
            f()

    def _for_writes(self, k: Key, after_miss: bool) -> Callable[[], bool | None]:
        """When writes for k may go: True, k is put; False, go anyway
        (nothing to wait for, or its put failed); None, wait."""

        def ready() -> bool | None:
            if k in self._recent:
                return True
            if k in self._failed:
                return False
            if not after_miss and self._inflight[k[:2]] == 0 and k[:2] not in self._active:
                return False
            return None

        return ready

    def _for_put(self, parent: Key) -> Callable[[], bool | None]:
        """When a put whose parent is parent may go: its writes are done."""
        return lambda: True if self._writing[parent] == 0 else None

    def _poll(self, t: _Thread, ready: Callable[[], bool | None], wake: Callable[[], None]) -> bool | None:
        with self._lock:
            got = ready()
            if got is None:
                self._waiters.setdefault(t, []).append(wake)
            return got

    def _drop(self, t: _Thread, wake: Callable[[], None]) -> None:
        with self._lock:
            ws = self._waiters.get(t, [])
            if wake in ws:
                ws.remove(wake)
            if not ws:
                self._waiters.pop(t, None)

    def _wait(self, t: _Thread, ready: Callable[[], bool | None], budget: float) -> bool:
        deadline = time.monotonic() + budget
        while True:
            ev = threading.Event()
            got = self._poll(t, ready, ev.set)
            if got is not None:
                return got
            if not ev.wait(max(0.0, deadline - time.monotonic())):
                self._drop(t, ev.set)
                return False

    async def _await(self, t: _Thread, ready: Callable[[], bool | None], budget: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        while True:
            done = asyncio.Event()

            def wake(done: asyncio.Event = done) -> None:
                try:
                    loop.call_soon_threadsafe(done.set)
                except RuntimeError:  # the loop is closed: nobody waits
                    pass

            got = self._poll(t, ready, wake)
            if got is not None:
                return got
            try:
                await asyncio.wait_for(done.wait(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                self._drop(t, wake)
                return False

    def _budget(self, after_miss: bool) -> float:
        return self.timeout if after_miss else min(GRACE, self.timeout)

    def wait(self, k: Key, *, after_miss: bool) -> bool:
        """Waits until checkpoint k is put: after a miss, at most the
        timeout; before sending, at most GRACE and only when a put of its
        thread is in flight or was made. True when k is put."""
        return self._wait(k[:2], self._for_writes(k, after_miss), self._budget(after_miss))

    async def await_(self, k: Key, *, after_miss: bool) -> bool:
        """wait, for a coroutine."""
        return await self._await(k[:2], self._for_writes(k, after_miss), self._budget(after_miss))

    def wait_writes(self, parent: Key) -> None:
        """Waits (at most the timeout) until the writes this saver is
        sending for checkpoint parent are done, so that loom gets a
        checkpoint's writes before its child."""
        self._wait(parent[:2], self._for_put(parent), self.timeout)

    async def await_writes(self, parent: Key) -> None:
        """wait_writes, for a coroutine."""
        await self._await(parent[:2], self._for_put(parent), self.timeout)


__all__ = ["Key", "PutOrder", "key"]
