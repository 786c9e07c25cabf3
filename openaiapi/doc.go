// Package openaiapi serves OpenAI's Conversations and Responses APIs over
// loom threads, so that any OpenAI SDK — Python, TypeScript, Go, .NET, the
// Agents SDKs — keeps its conversations in loom by its base URL alone:
//
//	client := openai.NewClient(option.WithBaseURL("http://127.0.0.1:8080/openai/v1"), option.WithAPIKey("loom"))
//
// A conversation is a loom thread of the caller's tenant, and an item one of
// its messages (the item id is the message id): what an SDK writes can be
// forked, rolled back, searched and read in loom's page, and a loom fork is a
// conversation the SDK can use at once. Deleting an item makes a new version
// of the thread without it; the history keeps the old one.
//
// A response is a commit holding its input and output items, named by a
// checkpoint on its thread. previous_response_id continues from that
// commit: on its thread when it is the head, otherwise on a fork made there,
// so any earlier response can be continued — a branch, as loom does it. The
// model is the agent.ChatClient the server is given (loom serve --provider);
// loom runs no tools itself: function calls go back to the client, and its
// function_call_output items come in with the next request.
//
// Requests are authenticated by loom's middleware (httpapi.Server.Protect):
// the SDK's Authorization: Bearer key is a loom key, and its tenant scopes
// every thread read and written. Errors have OpenAI's shape
// ({"error":{"message","type","param","code"}}); what loom does not support
// of the two APIs is refused with a 400 that says so.
package openaiapi
