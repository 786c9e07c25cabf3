// Package conversation runs live conversations: the orchestrator of an
// interactive session (a terminal chat, an editor, a web page) over one
// streaming Agent and a loom thread that keeps the session durable.
//
// Roles and the direction of calls follow seed 002. The Conversation
// commands its Agent synchronously — AppendUserMessage, ToolResult,
// Continue, Abort, Truncate, Compact — and after a command returns, the
// agent's state reflects it. The agent tells the conversation what happens
// by events (ContentUpdated, AgentStopped, AgentError), which join the
// conversation's one event loop; nothing calls back into its state. The
// conversation reads the agent's Status for display and keeps no copy.
//
// The conversation's own state is its Mode: normal, tool_use (the tools the
// agent asked for run, each on its own goroutine, their results coming back
// on the loop) or control_flow (compact, fork, yield). What an answer's tool
// calls mean is decided in one function. The conversation also offers the
// agent tools of its own: compact (replace the conversation with a summary:
// a compact commit, the originals kept in the thread's history),
// fork_thread (a new conversation on an O(1) loom fork of the thread),
// spawn_subagent and wait_for_subagents (sub-agents on threads of their
// own, linked to the parent's; aborting a parent aborts them), and, for a
// sub-agent, yield_to_parent.
//
// Every stop of the agent is a commit of the thread — the turn's messages
// with the mode and status — and so is each message the user sends, and
// each round of tool results, before the stream that answers it starts;
// that commit marks the turn in flight (the status streaming). Open
// resumes a conversation after a restart, or a crash, in the mode of its
// last stop: tools that were running run again, a compact or fork under
// way is done again, and a turn in flight is asked of the model again (or,
// with Options.StopInterrupted, left stopped/interrupted for Continue).
// Close aborts what is in flight; Suspend, for a server that shuts down,
// stops without aborting, and the next Open takes the turn up again.
//
// What the thread cannot hold is refused before it is accepted: a message
// over the DB's limits (thread.DB.CheckCommit) is ErrInvalid, and changes
// nothing. A commit that fails all the same (the store is down) is never a
// quiet stop: the command returns ErrNotSaved, or an error notice carries
// it, the agent's status is error, and the conversation shows what its
// thread holds, so the next message is saved.
//
// The smallest use:
//
//	c, _ := conversation.New(ctx, db, conversation.Options{Client: client})
//	c.Send(ctx, message.User("Plan a weekend in Lisbon"), false) // streams; c.Agent().Partial() grows
//	c.Wait(ctx)                                                  // until the turn (and its tools) ended
//	c.Send(ctx, message.User("and book it"), true)               // queued while a turn runs
//	c.Abort(ctx)                                                 // safe in every state
//	f, _ := c.Fork(ctx, "what about Porto?")                     // a new conversation; c goes on
//
// Every call that reads or writes the thread takes a context first. A turn
// outlives the call that began it: the context bounds the call (and gives
// the turn its parent span), Abort ends the turn.
//
// A front end learns of changes through Options.Notify, called on the
// event loop (it must not block or call back).
package conversation
