// Package foundry provides loom chat clients for the Foundry Agent Service,
// whose threads the service keeps: loom keeps the id, the context
// providers' state and a mirror of the messages, so that views, history,
// export and every interface show them.
//
// Classic speaks the classic protocol of Foundry agents — agents, threads,
// messages, runs, requires_action tool calls answered with tool outputs,
// the api-version parameter — over plain net/http (there is no maintained
// Go SDK for it). A loom thread becomes a Foundry thread on its first run,
// or adopts one by id (agent.NewServiceThread); the named agent answers,
// polled or streamed; its tool calls are answered by the loom agent's
// tools within the same run; Messages reads the service's messages with
// its cursors; DeleteThread deletes one. A Foundry thread is linear, so
// loom refuses to fork it, roll it back or copy it (thread.ErrUnsupported,
// as for the Conversations API); thread.Copy between stores carries the
// loom thread with its service id, still the same Foundry thread.
//
// Requests are authenticated with an API key or Microsoft Entra ID tokens
// (scope https://ai.azure.com/.default, azidentity's DefaultAzureCredential
// by default), retried on 429 and 5xx after what the service's Retry-After
// says, and their errors are *agent.ProviderError values with the service's
// code and request id.
//
//	c, _ := foundry.NewClassic(foundry.ClassicOptions{}) // AZURE_AI_PROJECT_ENDPOINT, AZURE_AI_AGENT_ID
//	a := agent.New(c, &agent.Options{Tools: tools})
//	th, _ := a.NewServiceThread(ctx, db, "thread_abc", thread.CreateOptions{}) // an existing thread
//	res, _ := a.Run(ctx, th, message.User("Where were we?"))
//
// Current speaks the current protocol: the OpenAI Responses and
// Conversations APIs under the project endpoint (…/openai, with
// api-version), the agent named by reference in each request. Its chat is
// package openai's Responses client on the official OpenAI Go SDK, in its
// Conversations mode, with Foundry's authentication and the agent
// reference added by its HTTP transport (so that package openai stays the
// only importer of the SDK); the SDK retries 429 and 5xx as Retry-After
// says. Messages reads a conversation's items with the service's cursors,
// and DeleteConversation deletes one.
//
// The environment, as the Azure tools name it: AZURE_AI_PROJECT_ENDPOINT,
// AZURE_AI_AGENT_NAME (current) or AZURE_AI_AGENT_ID (classic),
// AZURE_AI_API_KEY, and for Entra ID what DefaultAzureCredential reads
// (AZURE_TENANT_ID, AZURE_CLIENT_ID, AZURE_CLIENT_SECRET…, or `az login`).
package foundry
