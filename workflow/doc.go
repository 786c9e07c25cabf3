// Package workflow keeps workflows as loom threads: a workflow thread (kind
// workflow) whose messages record every step taken and whose state holds
// the execution state and the list of its sub-threads, and sub-threads —
// a default "main", and one per agent or key — each a full loom thread
// (appendable, forkable, viewable, run by agent.Run), linked to its
// workflow (thread id "<workflow>.<key>", CreateOptions.Parent) and kept
// in its fork family.
//
// A Graph declares the steps as Go functions with the steps that may follow
// each: a sequence, a fan-out (the steps of one round run concurrently,
// agents on their own sub-threads), a fan-in (a step chosen by several
// steps of a round runs once, after all of them, with all their outputs),
// conditional next (Step.Goto), loops (a writer and a reviewer that name
// each other, until one leaves the loop), and a fan-out decided at run time
// (Step.Send, LangGraph's Send: N instances of a step, each with its own
// input, fanned in as an array in instance order). Workflow.Run runs it:
//
//	w, _ := workflow.Create(ctx, db, workflow.CreateOptions{ID: "trip"})
//	g := workflow.NewGraph().
//		Add("plan", plan, "hotels", "food").
//		Add("hotels", research("hotels"), "write").
//		Add("food", research("food"), "write").
//		Add("write", write)
//	ex, err := w.Run(ctx, g, nil)
//
// Every step is recorded as it starts and as it ends, each record a message
// of the workflow thread committed with what the step changed; the commit
// that ends a round also starts the next round's steps, so that a step
// costs one commit (and one more where it first uses a sub-thread). A workflow
// killed at any moment resumes at the next Run from its last committed
// step: steps that ended are not run again, and a step that had started
// but not ended runs again — as in LangGraph, a step is the unit of
// retry, and work a step does outside loom should be idempotent. Unlike
// there, the sub-threads the interrupted attempt had written to are moved
// back first, so the second attempt starts from what the first one saw.
// One runner runs a workflow at a time (a lease in its state): another Run
// gets ErrBusy, or waits with RunOptions.Wait, and a runner that finds the
// workflow moved under it stops with thread.ErrConflict.
//
// A Run runs at most RunOptions.MaxRounds rounds (DefaultMaxRounds, 100,
// LangGraph's recursion_limit): a loop that does not end stops with a
// *StepLimitError (ErrStepLimit), its lease let go and nothing of the next
// round started, and a later Run goes on from exactly there.
//
// A step can ask for input (Step.Ask) and the workflow waits, durably:
// Provide gives the input, from any process, and the next Run goes on. A
// person can also edit the execution (Update, LangGraph's update_state):
// set the workflow's input, a step's output, or which steps run next, at
// its head or at any past version (or on a Fork), and the next Run goes
// on from the edited execution; the edit is recorded with its author. The
// output of a step that waits, failed or has not ended ends it (as_node):
// it does not run, and its successors get that output.
//
// Time travel is for the whole workflow. The execution state is versioned
// with the workflow thread, so Execution reads it at any version;
// Checkpoint records the execution state and the head of every sub-thread
// in one commit — or, while a runner works, from any process, commits
// nothing and records the workflow as of its last step end; Restore moves the workflow and every sub-thread back to a
// checkpoint or version in one atomic store operation; Fork makes a new
// workflow whose sub-threads are forks of each sub-thread, in one atomic
// operation that copies no message; At reads the execution state and every
// sub-thread's messages at any point. These move several threads at once
// through thread.Group, which every store runs as one batch.
//
// Workflow.Events yields a workflow's progress — a step started, done,
// waiting, failed, interrupted; the workflow done, waiting, failed — derived
// from the step records of its thread, version by version, each event with
// a cursor to resume after; it follows the workflow live until its context
// ends. A Registry names graphs, and a Runner starts and resumes them by
// name in the background, for a server (httpapi.Options.Workflows,
// mcpserver.Options.Workflows): a workflow started by name carries it
// (LabelName), which finds its graph when it is resumed.
//
// What each operation costs (n sub-threads):
//
//	a step of Run           one commit of the workflow thread (its end, with the next round's starts),
//	                        + one where it first uses a sub-thread; a Run: one read of the records at its claim
//	a round of a loop       the same: a loop costs what its rounds' steps cost; a Run stopped at its
//	                        limit, one more commit (the lease let go)
//	N instances (Send)      N commits (each instance's end; their starts ride on the commit that ends
//	                        the sender's round), + one per sub-thread first used; the sender's end
//	                        records the N inputs; the execution state names the N instances, so each
//	                        of those commits writes O(N) bytes of state
//	Update                  one commit (with n+1 moves in its batch at a past version); its reads:
//	                        the workflow thread's messages at that version
//	Checkpoint              n record reads + one batch: a commit, n+1 checkpoints
//	Checkpoint beside a run n record reads + one batch of at most n+1 checkpoints, no commit
//	Restore, Fork           n record and history reads + one batch of n+1 moves (creations)
//	Execution, At           the workflow thread's messages (one per step record) + the sub-threads read
//
// none of which grows with the sub-threads' length.
package workflow
