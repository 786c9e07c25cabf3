// Package store is the contract between package thread and the backends
// that keep threads: what a backend implements (Store and its optional
// upgrades), what it is given to write (Batch), and the batch planner
// every backend applies batches with (PlanBatch), so that the rules of a
// batch are written once, here, and no backend restates them.
//
// It is to package thread what database/sql/driver is to database/sql: a
// program that uses threads imports thread and a backend (sqlite,
// postgres, redis, jsonfile, or thread's own memory store); a backend
// imports store. The values a thread is made of (Commit, Record,
// HistoryEntry, Checkpoint, …) and the errors are defined here and are the
// same types under thread's names.
//
// A backend's Apply is three steps in one transaction (or one script, or
// under one lock): answer the planner's questions (Facts) about what the
// store holds, call PlanBatch, and write the Plan it returns in the order
// its doc gives. thread/storetest checks every backend against the whole
// contract.
package store
