// Package foundrytest serves the two protocols of the Foundry Agent
// Service from memory, for tests and examples: Classic (agents, threads,
// messages, runs, tool outputs, api-version) and Current (the OpenAI
// Responses and Conversations APIs under a project endpoint, with an
// agent reference; or, with OpenAI set, OpenAI's own). The requests and
// answers have the shapes of the services' API references; their agent
// says back what it is told ("You said: …"), calls get_weather when asked
// about the weather, and fails a run asked to fail. They check API keys or
// the tokens of a Credential, and can refuse requests with 429.
package foundrytest
