package agent_test

import (
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/agenttest"
	"github.com/loomthreads/loom/agent/scripted"
)

// The table of seed 000's rules on the scripted provider, as a service
// that chains responses.
func TestKindRulesScripted(t *testing.T) {
	agenttest.RunKindRules(t, agenttest.Provider{
		New: func(t *testing.T) agent.ChatClient {
			c := serviceClient(scripted.Step{Text: "hello", ConversationID: "auto"})
			c.Repeat = true
			return c
		},
		NewServiceID: func(t *testing.T) string { return "resp_0" },
	})
}
