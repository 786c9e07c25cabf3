package worklog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/worklog"
)

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "worklog-example")
	defer os.RemoveAll(dir)

	log, _ := worklog.Open(filepath.Join(dir, ".gitmem"), nil)
	log.SessionStart(ctx, worklog.StartOptions{})
	log.Create(ctx, worklog.CreateOptions{Text: "Release notes still to write"})
	log.Create(ctx, worklog.CreateOptions{Text: "Flaky login test in CI"})
	dup, _ := log.Create(ctx, worklog.CreateOptions{Text: "flaky login test in CI."})
	fmt.Println("deduplicated:", dup.Deduplicated)

	res, _ := log.Resolve(ctx, worklog.ResolveOptions{TextMatch: "release notes", Note: "written"})
	fmt.Println("resolved:", res.ResolvedThread.Text, "-", res.ResolvedThread.ResolutionNote)

	// The next session, here or on another machine sharing the session
	// store, starts with what this one leaves open.
	log.SessionClose(ctx, worklog.CloseOptions{})
	next, _ := log.SessionStart(ctx, worklog.StartOptions{})
	for i, it := range next.OpenThreads {
		fmt.Printf("#%d %s\n", i+1, it.Text)
	}
	// Performance says how long it took against its target; a loaded
	// machine can miss it, so the example prints only what is certain.
	fmt.Println("items in the result:", next.Performance.ResultCount)
	// Output:
	// deduplicated: true
	// resolved: Release notes still to write - written
	// #1 Flaky login test in CI
	// items in the result: 1
}

func ExampleNormalize() {
	for _, stored := range []string{
		`"Fix the bug"`,
		`"{\"id\":\"t-0a1b2c3d\",\"note\":\"Rotate the keys\",\"status\":\"open\"}"`,
		`{"item":"Review the migration","context":"standup"}`,
		`{"id":"t-11112222","text":"t-abcd: Rename the flag","status":"resolved"}`,
	} {
		it, err := worklog.Normalize([]byte(stored), worklog.NormalizeOptions{})
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s %q\n", it.Status, it.Text)
	}
	// Output:
	// open "Fix the bug"
	// open "Rotate the keys"
	// open "Review the migration"
	// resolved "Rename the flag"
}

// A server's work items: each tenant's projects in a loom thread of the
// store, whose messages read as a log of the changes.
func ExampleLogs() {
	ctx := context.Background()
	db, _ := thread.Open(ctx, "memory://", nil)
	logs := worklog.NewLogs(db, nil)

	acme, _ := logs.Log("acme", "website")
	created, _ := acme.Create(ctx, worklog.CreateOptions{Text: "Renew the TLS certificate"})
	acme.Resolve(ctx, worklog.ResolveOptions{ID: created.Thread.ID, Note: "renewed"})

	other, _ := logs.Log("globex", "website")
	list, _ := other.List(ctx, worklog.ListOptions{IncludeResolved: true})
	fmt.Println("globex sees", len(list.Threads), "items")

	th, _ := db.WithTenant("acme").Thread(ctx, worklog.ThreadID("acme", "website"))
	msgs, _ := th.Messages(ctx, thread.ReadOptions{})
	for _, m := range msgs {
		fmt.Println(m.Role, strings.Replace(m.Text(), created.Thread.ID, "t-…", 1))
	}
	// Output:
	// globex sees 0 items
	// worklog + t-… Renew the TLS certificate
	// worklog ✓ t-… Renew the TLS certificate — renewed
}

// Session records kept in a thread store: what one machine closes, the
// next session on another — any process on the same store — carries.
func ExampleNewThreadSessions() {
	ctx := context.Background()
	db, _ := thread.Open(ctx, "memory://", &thread.Options{Tenant: "acme"})
	defer db.Close()
	here, _ := worklog.OpenDB(db, &worklog.Options{Project: "site"}) // sessions: NewThreadSessions(db)
	start, _ := here.SessionStart(ctx, worklog.StartOptions{})
	here.SessionClose(ctx, worklog.CloseOptions{SessionID: start.SessionID, OpenThreads: []json.RawMessage{json.RawMessage(`"Renew the certificate"`)}})

	there, _ := worklog.OpenDB(db, &worklog.Options{Project: "site"})
	res, _ := there.SessionStart(ctx, worklog.StartOptions{})
	fmt.Println(res.SessionsAggregated, res.OpenThreads[0].Text)

	closed, _ := worklog.NewThreadSessions(db).ClosedSessions(ctx, worklog.ClosedOptions{Project: "site"})
	fmt.Println(closed[0].ID == start.SessionID)
	// Output:
	// 1 Renew the certificate
	// true
}
