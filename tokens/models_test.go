package tokens

import "testing"

func TestEncodingFor(t *testing.T) {
	tests := []struct {
		model string
		want  Encoding
		exact bool
	}{
		{"gpt-4o", O200kBase, true},
		{"gpt-4o-mini-2024-07-18", O200kBase, true},
		{"chatgpt-4o-latest", O200kBase, true},
		{"gpt-4.1", O200kBase, true},
		{"gpt-4.1-nano", O200kBase, true},
		{"gpt-4.5-preview", O200kBase, true},
		{"gpt-5", O200kBase, true},
		{"gpt-5-mini", O200kBase, true},
		{"gpt-5.1-codex", O200kBase, true},
		{"o1", O200kBase, true},
		{"o1-preview", O200kBase, true},
		{"o3-mini", O200kBase, true},
		{"o4-mini-2025-04-16", O200kBase, true},
		{"gpt-oss-120b", O200kBase, true},
		{"GPT-4O", O200kBase, true},
		{"openai/gpt-4o", O200kBase, true},
		{"ft:gpt-4o-mini:acme::abc123", O200kBase, true},
		{"gpt-4", Cl100kBase, true},
		{"gpt-4-0613", Cl100kBase, true},
		{"gpt-4-turbo", Cl100kBase, true},
		{"gpt-3.5-turbo", Cl100kBase, true},
		{"gpt-3.5-turbo-16k", Cl100kBase, true},
		{"gpt-35-turbo", Cl100kBase, true},
		{"text-embedding-3-small", Cl100kBase, true},
		{"text-embedding-ada-002", Cl100kBase, true},
		{"ft:gpt-3.5-turbo:acme::x", Cl100kBase, true},
		// Estimates.
		{"gpt-4.2", O200kBase, false},
		{"gpt-40", O200kBase, false},
		{"claude-sonnet-4-5", O200kBase, false},
		{"claude-3-5-haiku-20241022", O200kBase, false},
		{"anthropic/claude-opus-4", O200kBase, false},
		{"us.anthropic.claude-3-7-sonnet-20250219-v1:0", O200kBase, false},
		{"meta-llama/Llama-3.1-8B-Instruct", Cl100kBase, false},
		{"llama3.1:8b", Cl100kBase, false},
		{"meta.llama3-70b-instruct-v1:0", Cl100kBase, false},
		{"Qwen/Qwen2.5-7B-Instruct", Cl100kBase, false},
		{"phi-4", Cl100kBase, false},
		{"mistral-large-latest", O200kBase, false},
		{"mistralai/Mixtral-8x7B-Instruct-v0.1", O200kBase, false},
		{"gemma-3-27b-it", O200kBase, false},
		{"gemini-2.5-pro", O200kBase, false},
		{"deepseek-chat", O200kBase, false},
		{"", O200kBase, false},
		{"some-model", O200kBase, false},
	}
	for _, tt := range tests {
		got, exact := EncodingFor(tt.model)
		if got != tt.want || exact != tt.exact {
			t.Errorf("EncodingFor(%q) = %v, %v; want %v, %v", tt.model, got, exact, tt.want, tt.exact)
		}
	}
}
