// Package agent runs agents on threads: a chat client, tools, context
// providers and the run loop that commits each completed step to a thread.
package agent
