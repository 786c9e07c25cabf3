package anthropic

import (
	"encoding/json"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
)

// toResponse maps a whole Anthropic message, received at once or collected
// from a stream, to loom's response: one assistant message whose contents
// are the blocks in order. The message has no id, so that the thread gives
// it one.
func toResponse(m *anthropic.Message) *agent.ChatResponse {
	msg := message.Message{Role: message.RoleAssistant}
	for _, b := range m.Content {
		if ct := toContent(b); ct != nil {
			msg.Contents = append(msg.Contents, ct)
		}
	}
	return &agent.ChatResponse{
		Messages:     []message.Message{msg},
		ResponseID:   m.ID,
		Model:        string(m.Model),
		Usage:        toUsage(m.Usage),
		FinishReason: finishReason(m.StopReason),
	}
}

// toContent maps one content block, or returns nil for a block with nothing
// in it.
//
// Blocks of types loom has no content for (server tools' calls and results,
// container uploads, types newer than this package) are kept as
// message.Unknown, holding the block's JSON with its type renamed
// "anthropic.<type>" so that it can never pass for a loom content type.
// Unknown contents are not sent back: Anthropic does not need them to
// continue, and the thread still records what the model did.
func toContent(b anthropic.ContentBlockUnion) message.Content {
	switch b.Type {
	case "text":
		if b.Text == "" {
			return nil
		}
		return message.Text{Text: b.Text}
	case "thinking":
		return message.Reasoning{Text: b.Thinking, Protected: b.Signature}
	case "redacted_thinking":
		return message.Reasoning{Protected: redactedPrefix + b.Data}
	case "tool_use":
		args := string(b.Input)
		if args == "" || args == "null" {
			args = "{}"
		}
		return message.FunctionCall{CallID: b.ID, Name: b.Name, Arguments: args}
	default:
		return unknownBlock(b)
	}
}

// unknownBlock returns b as a message.Unknown, or nil if its JSON is not an
// object.
func unknownBlock(b anthropic.ContentBlockUnion) message.Content {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(b.RawJSON()), &obj); err != nil || obj == nil {
		return nil
	}
	t, _ := json.Marshal("anthropic." + b.Type)
	obj["type"] = t
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil
	}
	ct, err := message.UnmarshalContent(raw)
	if err != nil {
		return nil
	}
	return ct
}

// toUsage maps Anthropic's usage. Anthropic counts the input it read from
// and wrote to its prompt cache apart from input_tokens; loom's InputTokens
// is all of the request's input, as other providers count it, and
// CachedInputTokens the part read from the cache.
func toUsage(u anthropic.Usage) message.Usage {
	in := u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
	return message.Usage{
		InputTokens:       in,
		OutputTokens:      u.OutputTokens,
		TotalTokens:       in + u.OutputTokens,
		CachedInputTokens: u.CacheReadInputTokens,
		ReasoningTokens:   u.OutputTokensDetails.ThinkingTokens,
	}
}

// finishReason maps Anthropic's stop reasons to loom's. Reasons loom has no
// name for (pause_turn, newer ones) are kept as Anthropic says them.
func finishReason(r anthropic.StopReason) agent.FinishReason {
	switch r {
	case anthropic.StopReasonEndTurn, anthropic.StopReasonStopSequence:
		return agent.FinishStop
	case anthropic.StopReasonMaxTokens, anthropic.StopReasonModelContextWindowExceeded:
		return agent.FinishLength
	case anthropic.StopReasonToolUse:
		return agent.FinishToolCalls
	case anthropic.StopReasonRefusal:
		return agent.FinishContentFilter
	default:
		return agent.FinishReason(r)
	}
}
