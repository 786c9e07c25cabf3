package thread

import "encoding/json"

// validKind reports whether k is one of the thread kinds.
func validKind(k Kind) bool {
	return k == KindUndetermined || k == KindLocal || k == KindService || k == KindWorkflow
}

// header returns a copy of c without its messages and metadata: what a
// handle keeps of its head.
func header(c *Commit) *Commit {
	return &Commit{ID: c.ID, Parent: c.Parent, Depth: c.Depth, State: cloneState(c.State), StateFrom: c.StateFrom, Op: c.Op, Time: c.Time}
}

func cloneState(s map[string]json.RawMessage) map[string]json.RawMessage {
	if s == nil {
		return nil
	}
	out := make(map[string]json.RawMessage, len(s))
	for k, v := range s {
		out[k] = append(json.RawMessage(nil), v...)
	}
	return out
}
