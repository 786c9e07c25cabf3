"""loomthreads: a typed client of loom serve's HTTP API, and LoomSaver, a
LangGraph checkpointer kept by loom (loomthreads.langgraph, which needs
langgraph-checkpoint installed)."""

from loomthreads.client import AsyncClient, Client, LoomError

__all__ = ["AsyncClient", "Client", "LoomError"]
__version__ = "0.1.0"
