"""loomthreads: a typed client of loom serve's HTTP API; LoomSaver, a
LangGraph checkpointer kept by loom (loomthreads.langgraph, which needs
langgraph-checkpoint installed); and LoomHistoryProvider, the Agent
Framework's session history kept by loom (loomthreads.agent_framework, which
needs agent-framework-core installed)."""

from loomthreads.client import AsyncClient, Client, LoomError

__all__ = ["AsyncClient", "Client", "LoomError"]
__version__ = "0.1.0"
