// Package langgraph keeps LangGraph's checkpoints in loom threads, so that
// a LangGraph graph in Python or TypeScript (through the clients in
// clients/python and clients/typescript, and loom serve's /v1/langgraph
// routes) keeps its threads in any loom store.
//
// LangGraph stores the whole state in every checkpoint, so a thread's
// storage grows with the square of its length. Here a checkpoint is a
// commit, and what it holds is stored once:
//
//   - Each LangGraph thread and namespace (thread_id, checkpoint_ns) is one
//     loom thread, labelled with both (ThreadKey names it).
//   - Each checkpoint is one commit on that thread and a loom checkpoint
//     named by the checkpoint's id, so it shows on the thread's timeline and
//     a later checkpoint can branch from it (updateState on an old
//     checkpoint is a rollback to it and a commit, in one atomic group).
//   - The channel named "messages", when it holds LangChain messages with
//     ids, is the thread's messages: a checkpoint whose list extends its
//     parent's appends only the new ones; a list that is not an extension
//     (a removal, an edit) branches from the last checkpoint whose messages
//     are a prefix of it and appends the rest.
//   - Every other channel's value, the checkpoint's header and metadata and
//     the pending writes of its tasks are the thread's state under lg/
//     keys, and a channel's value is replaced only when its version moves.
//
// So a LangGraph thread is a loom thread like any other: it forks, copies,
// exports and shows in the web UI with its messages and checkpoints.
package langgraph
