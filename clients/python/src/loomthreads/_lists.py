"""The message lists a saver holds, so that a put sends and a get receives
only what a turn added (LG.md: extends, shares, sum).

loom names a checkpoint's list of messages by its count and chain sum
({n, h}). For each LangGraph thread and namespace a saver remembers the
lists of its last few checkpoints, as the message objects it put or got
and their {n, h}: a put whose list begins with its parent's very objects
sends the rest with "extends"; a get names the last list it holds and
receives the rest; both rebuild the list from the same objects, so the
next put's identity check holds again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from itertools import islice
from operator import is_
from typing import Any

from langchain_core.messages import BaseMessage

from loomthreads._types import LangGraphMessagesSum


@dataclass(frozen=True)
class Known:
    """A list of messages loom holds: the objects, and their {n, h}."""

    messages: list[BaseMessage]
    n: int
    h: str

    def sum(self) -> LangGraphMessagesSum:
        return {"n": self.n, "h": self.h}

    def begins(self, value: Any) -> bool:
        """Whether value is a list that begins with these very objects."""
        return (
            type(value) is list
            and len(value) >= self.n
            and all(map(is_, islice(value, self.n), self.messages))
        )


class KnownLists:
    """The lists of the last per_thread checkpoints of each of the last
    threads (thread, namespace) pairs; safe for concurrent use."""

    def __init__(self, per_thread: int = 8, threads: int = 1000) -> None:
        self._per_thread = per_thread
        self._threads = threads
        self._lock = threading.Lock()
        self._by: OrderedDict[tuple[str, str], OrderedDict[str, Known]] = OrderedDict()

    def get(self, thread_id: str, ns: str, checkpoint_id: str) -> Known | None:
        with self._lock:
            lists = self._by.get((thread_id, ns))
            return lists.get(checkpoint_id) if lists is not None else None

    def last(self, thread_id: str, ns: str) -> Known | None:
        """The list last remembered for the thread and namespace."""
        with self._lock:
            lists = self._by.get((thread_id, ns))
            if not lists:
                return None
            return next(reversed(lists.values()))

    def find(self, thread_id: str, ns: str, s: LangGraphMessagesSum) -> Known | None:
        """A remembered list of the thread and namespace whose sum is s."""
        with self._lock:
            for k in reversed((self._by.get((thread_id, ns)) or {}).values()):
                if k.n == s["n"] and k.h == s["h"]:
                    return k
            return None

    def remember(self, thread_id: str, ns: str, checkpoint_id: str, known: Known) -> None:
        with self._lock:
            key = (thread_id, ns)
            lists = self._by.get(key)
            if lists is None:
                lists = self._by[key] = OrderedDict()
            self._by.move_to_end(key)
            lists[checkpoint_id] = known
            lists.move_to_end(checkpoint_id)
            while len(lists) > self._per_thread:
                lists.popitem(last=False)
            while len(self._by) > self._threads:
                self._by.popitem(last=False)

    def forget(self, thread_id: str) -> None:
        """Forgets every namespace of a thread (deleted, pruned)."""
        with self._lock:
            for key in [k for k in self._by if k[0] == thread_id]:
                del self._by[key]

    def clear(self) -> None:
        with self._lock:
            self._by.clear()


__all__ = ["Known", "KnownLists"]
