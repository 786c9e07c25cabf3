package openaiapi_test

import (
	"testing"

	"github.com/openai/openai-go/v3/conversations"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/agenttest"
	"github.com/loomthreads/loom/agent/scripted"
	loomopenai "github.com/loomthreads/loom/openai"
	"github.com/loomthreads/loom/thread"
)

// Seed 000's table with loom as the service: loom's own openai provider,
// in Conversations mode, keeps its service threads as conversations of
// loom's OpenAI-compatible API — created through openai-go, answered by
// the demo model — and keeps every kind rule.
func TestKindRulesWithLoomAsTheService(t *testing.T) {
	for _, st := range respStores {
		t.Run(st.name, func(t *testing.T) {
			s := serveResponses(t, st.open(t), scripted.Echo(), false)
			agenttest.RunKindRules(t, agenttest.Provider{
				New: func(t *testing.T) agent.ChatClient {
					return loomopenai.NewResponses(loomopenai.ResponsesOptions{Conversations: true,
						Options: loomopenai.Options{BaseURL: s.url, APIKey: "loom", Model: "loom"}})
				},
				NewServiceID: func(t *testing.T) string {
					c, err := s.a.Conversations.New(t.Context(), conversations.ConversationNewParams{})
					if err != nil {
						t.Fatal(err)
					}
					return c.ID
				},
			})
			// What the rules' runs wrote is loom's: conversations holding
			// each run's input and the demo model's answer.
			answered := 0
			for th, err := range s.db.Threads(t.Context(), thread.ListOptions{}) {
				if err != nil {
					t.Fatal(err)
				}
				msgs, err := th.Messages(t.Context(), thread.ReadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if th.Record().Labels["openai"] == "conversation" && len(msgs) == 2 && msgs[0].Text() == "hi" && msgs[1].Text() == "You said: hi" {
					answered++
				}
			}
			if answered == 0 {
				t.Fatal("no conversation on loom holds a run's input and answer")
			}
		})
	}
}
