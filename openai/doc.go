// Package openai provides loom chat clients on OpenAI's official Go SDK: Chat
// for the Chat Completions API, which OpenAI-compatible servers (Ollama, vLLM,
// llama.cpp, LM Studio) also speak, and Responses for the Responses API,
// whose service threads keep the conversation on OpenAI's side.
//
// The smallest use:
//
//	a := agent.New(openai.NewChat(openai.Options{Model: "gpt-4o-mini"}), nil)
//	res, err := a.Run(ctx, th, message.User("Hello!"))
//	fmt.Println(res.Text())
//
// The key comes from OPENAI_API_KEY unless Options.APIKey is set. A local
// model needs only a base URL; no key is needed:
//
//	openai.NewChat(openai.Options{Model: "llama3.2", BaseURL: "http://localhost:11434/v1"})
//
// A service thread on the Responses API sends only its new messages:
//
//	openai.NewResponses(openai.ResponsesOptions{Options: openai.Options{Model: "gpt-4.1"}})
//
// By default it chains responses (previous_response_id), so a thread can be
// forked and rolled back; ResponsesOptions.Conversations keeps it in a
// conversation of the Conversations API instead.
//
// Both clients convert loom messages both ways: text, images and files,
// function calls and their results (a failed result is sent as "Error: " and
// its text, since neither API can say a call failed), and reasoning where
// the API has it. Errors the API returns are *agent.ProviderError values with
// the HTTP status, OpenAI's error type and message; rate limits and server
// errors are retried by the SDK first (Options.MaxRetries). A canceled
// context gives the context's error. Constructors make no request.
package openai
