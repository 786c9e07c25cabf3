package thread_test

import (
	"testing"

	"github.com/loomthreads/loom/thread"
)

func TestOwn(t *testing.T) {
	tests := []struct {
		kind   thread.Kind
		labels map[string]string
		own    bool
	}{
		{thread.KindLocal, nil, false},
		{thread.KindLocal, map[string]string{"team": "a"}, false},
		{thread.KindLocal, map[string]string{thread.LabelOwner: "worklog"}, true},
		{thread.KindUndetermined, map[string]string{thread.LabelOwner: ""}, true},
		{thread.KindWorkflow, map[string]string{thread.LabelOwner: "workflow"}, true},
		{thread.KindLocal, map[string]string{"loom.worklog": "p"}, true},
		{thread.KindLocal, map[string]string{"loom.worklog": ""}, false},
		{thread.KindLocal, map[string]string{"loom.worklog.sessions": "p"}, true},
		{thread.KindLocal, map[string]string{"loom.workflow": "wf", "loom.workflow.key": "main"}, true},
		{thread.KindLocal, map[string]string{"loom.workflow": "wf"}, false},
		{thread.KindWorkflow, map[string]string{"loom.workflow": "wf", "loom.workflow.key": "main"}, false},
	}
	for _, tt := range tests {
		if got := thread.Own(&thread.Record{Kind: tt.kind, Labels: tt.labels}); got != tt.own {
			t.Errorf("Own(kind %s, labels %v) = %v, want %v", tt.kind, tt.labels, got, tt.own)
		}
	}
}
