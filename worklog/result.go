package worklog

import (
	"math"
	"time"
)

// TargetMS is the latency target of every operation, in milliseconds: the
// seed's target for list_threads, create_thread and resolve_thread (an
// in-memory read or a mutation and a file write).
const TargetMS = 100

// Performance is the seed's performance report, part of every result:
// how long the operation took against its target, how many results it
// returned, and what it touched.
type Performance struct {
	// LatencyMS is how long the operation took, in milliseconds (to the
	// microsecond).
	LatencyMS float64 `json:"latency_ms"`
	// TargetMS is the target, TargetMS.
	TargetMS int `json:"target_ms"`
	// MeetsTarget reports LatencyMS <= TargetMS.
	MeetsTarget bool `json:"meets_target"`
	// ResultCount is how many items the result holds.
	ResultCount int `json:"result_count"`
	// CacheHit reports that the local file had not changed since this Log
	// last read it, so its parsed items were used again.
	CacheHit bool `json:"cache_hit"`
	// TotalLatencyMS is LatencyMS (the seed reports both).
	TotalLatencyMS float64 `json:"total_latency_ms"`
	// NetworkCallsMade counts the calls to a session store other than
	// the local file.
	NetworkCallsMade int `json:"network_calls_made"`
	// FullyLocal reports NetworkCallsMade == 0.
	FullyLocal bool `json:"fully_local"`
}

// performance returns the report of an operation that started at start.
func performance(start time.Time, count int, cacheHit bool, calls int) Performance {
	ms := math.Round(float64(time.Since(start).Nanoseconds())/1e3) / 1e3
	return Performance{
		LatencyMS:        ms,
		TargetMS:         TargetMS,
		MeetsTarget:      ms <= TargetMS,
		ResultCount:      count,
		CacheHit:         cacheHit,
		TotalLatencyMS:   ms,
		NetworkCallsMade: calls,
		FullyLocal:       calls == 0,
	}
}

// ListResult is the result of list_threads.
type ListResult struct {
	// Threads are the items listed, oldest first (by created_at, then
	// by their place in the file): #N in Resolve is the Nth open one.
	// The list is shared with the other lists of the same items, to
	// spare copying thousands of items per call: do not change its
	// elements (appending to it is safe).
	Threads []Item `json:"threads"`
	// TotalOpen and TotalResolved count all the items, whatever the
	// filter.
	TotalOpen     int         `json:"total_open"`
	TotalResolved int         `json:"total_resolved"`
	Performance   Performance `json:"performance"`
}

// CreateResult is the result of create_thread.
type CreateResult struct {
	// Thread is the new item, or the open item with the same normalized
	// text that was there already.
	Thread Item `json:"thread"`
	// Deduplicated reports that Thread was there already: nothing was
	// created.
	Deduplicated bool        `json:"deduplicated,omitzero"`
	Performance  Performance `json:"performance"`
}

// ResolveResult is the result of resolve_thread. A failed resolution is
// an error (ErrNotFound, an *AmbiguousError, ErrInvalid), not a result.
type ResolveResult struct {
	// Success is always true.
	Success bool `json:"success"`
	// ResolvedThread is the item, as resolved.
	ResolvedThread Item `json:"resolved_thread"`
	// AlreadyResolved reports that the item was resolved before: nothing
	// was changed.
	AlreadyResolved bool `json:"already_resolved,omitzero"`
	// AlsoResolved are the open items the note named as duplicates
	// ("duplicate of t-…"), resolved with it.
	AlsoResolved []Item `json:"also_resolved,omitzero"`
	// Message says what was done, for people.
	Message     string      `json:"message"`
	Performance Performance `json:"performance"`
}

// StartResult is the result of session_start.
type StartResult struct {
	// SessionID names the session started.
	SessionID string `json:"session_id"`
	// Project is the Log's project.
	Project string `json:"project"`
	// OpenThreads are the open items after aggregation, oldest first,
	// without project state.
	OpenThreads []Item `json:"open_threads"`
	// RecentlyResolved are the items resolved in the last 14 days, newest
	// first.
	RecentlyResolved []Item `json:"recently_resolved"`
	// ProjectState are the items that record the project's state, newest
	// first (Aggregation.ProjectState).
	ProjectState []Item `json:"project_state"`
	// SessionsAggregated is how many closed sessions were aggregated.
	SessionsAggregated int         `json:"sessions_aggregated"`
	Performance        Performance `json:"performance"`
}

// CloseResult is the result of session_close.
type CloseResult struct {
	// SessionID names the session closed.
	SessionID string `json:"session_id"`
	// Project is the Log's project.
	Project string `json:"project"`
	// ClosedAt is the time of the close record.
	ClosedAt time.Time `json:"closed_at"`
	// OpenThreads are the open items the close record carries, without
	// project state.
	OpenThreads []Item `json:"open_threads"`
	// Created are the items of the payload that were new to the local
	// file.
	Created     []Item      `json:"created"`
	Performance Performance `json:"performance"`
}
