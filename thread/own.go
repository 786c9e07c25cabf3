package thread

// LabelOwner is the label of a thread that loom makes for its own use
// rather than for a person to read: a work log's items or sessions, a
// workflow's sub-threads. Its value names the package that made it
// ("worklog", "workflow"). Listings leave such threads out when asked
// (ListOptions.Internal); setting it on any thread hides that thread the
// same way.
const LabelOwner = "loom.owner"

// Legacy labels of loom's own threads made before LabelOwner existed.
// They are the values of worklog.LabelProject, the session log's
// project label and workflow.LabelWorkflow and LabelKey, written out here
// because those packages import this one; their tests check that the
// threads they make are Own.
const (
	legacyWorklog     = "loom.worklog"
	legacySessions    = "loom.worklog.sessions"
	legacyWorkflow    = "loom.workflow"
	legacyWorkflowKey = "loom.workflow.key"
)

// Own reports whether loom made the thread of r for its own use: it has
// LabelOwner, or, made by an older loom, a work log's project label or a
// workflow sub-thread's labels. A workflow's own thread (KindWorkflow) is
// people's, not loom's.
func Own(r *Record) bool {
	l := r.Labels
	if _, ok := l[LabelOwner]; ok {
		return true
	}
	if l[legacyWorklog] != "" || l[legacySessions] != "" {
		return true
	}
	return r.Kind != KindWorkflow && l[legacyWorkflow] != "" && l[legacyWorkflowKey] != ""
}
