package foundry

import (
	"testing"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/agenttest"
	loomopenai "github.com/loomthreads/loom/openai"
)

// Seed 000's thread kind rules, the same table on each provider: Foundry
// classic, Foundry current, and OpenAI's Responses API in its
// Conversations mode, each against a local server of its protocol.
func TestKindRules(t *testing.T) {
	t.Run("foundry-classic", func(t *testing.T) {
		srv, ts := newClassicServer(t)
		srv.apiKey = "key-1"
		agenttest.RunKindRules(t, agenttest.Provider{
			New: func(t *testing.T) agent.ChatClient { return classicClient(t, ts.URL, ClassicOptions{}) },
			NewServiceID: func(t *testing.T) string {
				srv.mu.Lock()
				defer srv.mu.Unlock()
				th := &fakeThread{id: srv.id("thread")}
				srv.threads[th.id] = th
				return th.id
			},
		})
	})
	newConversation := func(srv *currentServer) func(t *testing.T) string {
		return func(t *testing.T) string {
			srv.mu.Lock()
			defer srv.mu.Unlock()
			id := srv.id("conv")
			srv.conversations[id] = nil
			return id
		}
	}
	t.Run("foundry-current", func(t *testing.T) {
		srv, ts := newCurrentServer(t)
		srv.apiKey = "key-1"
		agenttest.RunKindRules(t, agenttest.Provider{
			New:          func(t *testing.T) agent.ChatClient { return currentClient(t, ts.URL, Options{}) },
			NewServiceID: newConversation(srv),
		})
	})
	t.Run("openai-conversations", func(t *testing.T) {
		srv, ts := newCurrentServer(t)
		srv.apiKey, srv.openai = "key-1", true
		agenttest.RunKindRules(t, agenttest.Provider{
			New: func(t *testing.T) agent.ChatClient {
				return loomopenai.NewResponses(loomopenai.ResponsesOptions{Conversations: true,
					Options: loomopenai.Options{Model: "gpt-4.1", APIKey: "key-1", BaseURL: ts.URL + "/openai"}})
			},
			NewServiceID: newConversation(srv),
		})
	})
}
