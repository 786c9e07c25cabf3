/**
 * @loomthreads/loom: a typed client of loom serve's HTTP API and LoomSaver,
 * a LangGraph.js checkpointer kept by loom.
 */
export { LoomClient, LoomError, type LoomClientOptions } from "./client.js";
export { LoomSaver, type LoomSaverOptions } from "./saver.js";
export { MESSAGES_CHANNEL, fromStoredMessages, toStoredMessages } from "./messages.js";
export type * from "./wire.js";
