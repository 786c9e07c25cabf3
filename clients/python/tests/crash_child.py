"""The process test_graph's crash test kills: it runs the chat graph on
LoomSaver for one human message, and the lookup of $LOOM_TEST_KILL_ON
SIGKILLs it once the other tasks' writes of its step are stored.

    python -m tests.crash_child URL THREAD_ID TEXT
"""

from __future__ import annotations

import sys

from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from loomthreads.langgraph import LoomSaver
from tests import chat_graph


def main(url: str, thread_id: str, text: str) -> int:
    saver = LoomSaver(url=url)
    cfg: RunnableConfig = {"configurable": {"thread_id": thread_id}}

    def others_stored() -> bool:
        # A tool's result among the pending writes of the latest checkpoint.
        t = saver.get_tuple(cfg)
        return t is not None and any(
            ch == "messages" and isinstance(v, list) and any(isinstance(m, ToolMessage) for m in v)
            for _, ch, v in t.pending_writes or []
        )

    chat_graph.kill_when = others_stored
    chat_graph.build(saver).invoke({"messages": [HumanMessage(text)]}, cfg)
    return 3  # not reached: the lookup kills the process


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
