package genai

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
)

type named struct{}

func (named) ProviderName() string { return "acme" }

type plain struct{}

func TestProviderName(t *testing.T) {
	for _, tc := range []struct {
		client any
		want   string
	}{
		{named{}, "acme"},
		{&plain{}, "genai"}, // this package's last path element
		{nil, ""},
	} {
		if got := ProviderName(tc.client); got != tc.want {
			t.Errorf("ProviderName(%T) = %q, want %q", tc.client, got, tc.want)
		}
	}
}

func TestNames(t *testing.T) {
	attrs := func(kv []attribute.KeyValue) map[attribute.Key]string {
		m := map[attribute.Key]string{}
		for _, a := range kv {
			m[a.Key] = a.Value.Emit()
		}
		return m
	}
	name, kv := InvokeAgent("openai", "th", "", "")
	if a := attrs(kv); name != "invoke_agent" || a["gen_ai.agent.name"] != "" || a["gen_ai.request.model"] != "" || a["gen_ai.conversation.id"] != "th" {
		t.Errorf("InvokeAgent without a name or model: %q %v", name, a)
	}
	name, kv = InvokeAgent("openai", "th", "bot", "gpt")
	if a := attrs(kv); name != "invoke_agent bot" || a["gen_ai.agent.name"] != "bot" || a["gen_ai.request.model"] != "gpt" || a["gen_ai.operation.name"] != "invoke_agent" {
		t.Errorf("InvokeAgent: %q %v", name, a)
	}
	name, kv = Chat("anthropic", "th", "")
	if a := attrs(kv); name != "chat" || a["gen_ai.provider.name"] != "anthropic" || a["gen_ai.request.model"] != "" {
		t.Errorf("Chat without a model: %q %v", name, a)
	}
	name, kv = Tool("weather", "c1")
	if a := attrs(kv); name != "execute_tool weather" || a["gen_ai.tool.name"] != "weather" || a["gen_ai.tool.call.id"] != "c1" || a["gen_ai.operation.name"] != "execute_tool" {
		t.Errorf("Tool: %q %v", name, a)
	}
}
