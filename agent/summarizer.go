package agent

import (
	"context"
	"errors"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// DefaultSummaryPrompt is what Summarizer asks for when its Prompt is "".
const DefaultSummaryPrompt = "Summarize the conversation above for the assistant who will continue it: " +
	"the user's goals, the facts and decisions established, tool results that still matter, and open questions. " +
	"Be brief and precise; write only the summary."

// Summarizer has a chat client write the summaries of thread views that
// use thread.Summarize.
type Summarizer struct {
	Client ChatClient
	// Model names the model; "" means the client's default.
	Model string
	// Prompt is the instruction that asks for the summary; "" means
	// DefaultSummaryPrompt.
	Prompt string
}

var _ thread.Summarizer = Summarizer{}

// Summarize returns a system message that summarizes msgs. Being a system
// message, every later view keeps it.
func (s Summarizer) Summarize(ctx context.Context, msgs []message.Message) (message.Message, error) {
	prompt := s.Prompt
	if prompt == "" {
		prompt = DefaultSummaryPrompt
	}
	req := append(append([]message.Message(nil), msgs...), message.User(prompt))
	resp, err := s.Client.Response(ctx, req, &ChatOptions{Model: s.Model, Store: ptr(false)})
	if err != nil {
		return message.Message{}, err
	}
	text := resp.Text()
	if text == "" {
		return message.Message{}, errors.New("summarizer: the model wrote no text")
	}
	return message.System("Summary of the earlier conversation: " + text), nil
}
