package foundry

import (
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/agenttest"
	"github.com/loomthreads/loom/internal/foundrytest"
	loomopenai "github.com/loomthreads/loom/openai"
)

// Seed 000's thread kind rules, the same table on each provider: Foundry
// classic, Foundry current, and OpenAI's Responses API in its
// Conversations mode, each against a local server of its protocol.
func TestKindRules(t *testing.T) {
	t.Run("foundry-classic", func(t *testing.T) {
		srv, ts := foundrytest.NewClassic(t)
		srv.APIKey = "key-1"
		agenttest.RunKindRules(t, agenttest.Provider{
			New:          func(t *testing.T) agent.ChatClient { return classicClient(t, ts.URL, ClassicOptions{}) },
			NewServiceID: func(t *testing.T) string { return srv.CreateThread() },
		})
	})
	newConversation := func(srv *foundrytest.Current) func(t *testing.T) string {
		return func(t *testing.T) string { return srv.CreateConversation() }
	}
	t.Run("foundry-current", func(t *testing.T) {
		srv, ts := foundrytest.NewCurrent(t)
		srv.APIKey = "key-1"
		agenttest.RunKindRules(t, agenttest.Provider{
			New:          func(t *testing.T) agent.ChatClient { return currentClient(t, ts.URL, Options{}) },
			NewServiceID: newConversation(srv),
		})
	})
	t.Run("openai-conversations", func(t *testing.T) {
		srv, ts := foundrytest.NewCurrent(t)
		srv.APIKey, srv.OpenAI = "key-1", true
		agenttest.RunKindRules(t, agenttest.Provider{
			New: func(t *testing.T) agent.ChatClient {
				return loomopenai.NewResponses(loomopenai.ResponsesOptions{Conversations: true,
					Options: loomopenai.Options{Model: "gpt-4.1", APIKey: "key-1", BaseURL: ts.URL + "/openai"}})
			},
			NewServiceID: newConversation(srv),
		})
	})
}
