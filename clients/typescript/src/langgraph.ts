/**
 * @loomthreads/loom/langgraph: LoomSaver, LangGraph.js's checkpointer kept by
 * loom serve.
 */
export { LoomSaver, type LoomSaverOptions } from "./saver.js";
export { MESSAGES_CHANNEL, fromStoredMessages, toStoredMessages } from "./messages.js";
export { LoomClient, LoomError, type LoomClientOptions } from "./client.js";
