package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// BenchCommand runs the standard scenarios against a store.
type BenchCommand struct {
	base
	Duration time.Duration
	Writers  int
}

// Flags implements Command.
func (c *BenchCommand) Flags() *pflag.FlagSet {
	fs := c.flagSet()
	fs.DurationVar(&c.Duration, "duration", time.Second, "how long each scenario runs: a duration `D` such as 500ms or 5s")
	fs.IntVar(&c.Writers, "writers", 16, "the `N` writers of the concurrent scenarios")
	return fs
}

// benchResult is one row of the benchmark table.
type benchResult struct {
	Scenario  string  `json:"scenario"`
	Ops       int     `json:"ops"`
	OpsPerSec float64 `json:"ops_per_sec"`
	P50Micros float64 `json:"p50_us"`
	P99Micros float64 `json:"p99_us"`
}

// benchJSON is the --json output of bench.
type benchJSON struct {
	Store    string        `json:"store"`
	Tenant   string        `json:"tenant"`
	Duration string        `json:"duration"`
	Writers  int           `json:"writers"`
	Results  []benchResult `json:"results"`
	Removed  int           `json:"removed"`
}

// Run implements Command.
func (c *BenchCommand) Run(ctx context.Context, args []string) (err error) {
	if _, err := c.positional(args, 0, 0); err != nil {
		return err
	}
	switch {
	case c.Duration <= 0:
		return c.usage("--duration must be positive")
	case c.Writers < 1:
		return c.usage("--writers must be at least 1")
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tenant := "bench-" + hex.EncodeToString(rnd[:])
	db, err := thread.Open(ctx, c.Store, &thread.Options{Tenant: tenant, AppendRetries: 1_000_000})
	if err != nil {
		return fmt.Errorf("open store %s: %w", redact(c.Store), err)
	}
	defer db.Close()

	b := &bencher{db: db, d: c.Duration}
	out := benchJSON{Store: redact(c.Store), Tenant: tenant, Duration: c.Duration.String(), Writers: c.Writers}
	defer func() {
		// Whatever happened, the bench tenant goes, even after an interrupt.
		n, cerr := b.cleanup(context.WithoutCancel(ctx))
		out.Removed = n
		if cerr != nil {
			err = errors.Join(err, fmt.Errorf("bench: remove the threads of tenant %s: %w", tenant, cerr))
		}
		if err != nil {
			return
		}
		if c.JSON {
			err = writeJSON(c.Stdout, out)
			return
		}
		fmt.Fprintf(c.Stdout, "removed the %s made in tenant %s\n", plural(n, "thread", "threads"), tenant)
	}()

	scenarios := b.scenarios(c.Writers)
	// Rows are printed as soon as they are measured, so the columns are
	// sized up front rather than by a tabwriter.
	width := len("SCENARIO")
	for _, sc := range scenarios {
		width = max(width, len(sc.name))
	}
	row := func(cells ...string) {
		fmt.Fprintf(c.Stdout, "%-*s  %10s  %12s  %9s  %9s\n", width, cells[0], cells[1], cells[2], cells[3], cells[4])
	}
	if !c.JSON {
		fmt.Fprintf(c.Stdout, "store %s, tenant %s, %s a scenario, %s\n\n", redact(c.Store), tenant, c.Duration, plural(c.Writers, "writer", "writers"))
		row("SCENARIO", "OPS", "OPS/S", "P50", "P99")
	}
	for _, sc := range scenarios {
		r, err := sc.run(ctx)
		if err != nil {
			return fmt.Errorf("bench %s: %w", sc.name, err)
		}
		r.Scenario = sc.name
		out.Results = append(out.Results, r)
		if !c.JSON {
			row(r.Scenario, strconv.Itoa(r.Ops), fmt.Sprintf("%.0f", r.OpsPerSec), micros(r.P50Micros), micros(r.P99Micros))
		}
	}
	if !c.JSON {
		fmt.Fprintln(c.Stdout)
	}
	return nil
}

// micros writes a latency given in µs, in ns, µs or ms.
func micros(us float64) string {
	switch {
	case us < 1:
		return fmt.Sprintf("%.0fns", us*1000)
	case us < 10:
		return fmt.Sprintf("%.1fµs", us)
	case us < 10_000:
		return fmt.Sprintf("%.0fµs", us)
	}
	return fmt.Sprintf("%.1fms", us/1000)
}

// bencher runs the scenarios in the bench tenant of db.
type bencher struct {
	db *thread.DB
	d  time.Duration
}

type scenario struct {
	name string
	run  func(ctx context.Context) (benchResult, error)
}

var (
	benchUser      = strings.Repeat("u", 200)
	benchAssistant = strings.Repeat("a", 600)
	benchText      = strings.Repeat("m", 400)
)

func (b *bencher) scenarios(writers int) []scenario {
	// The 1,000-message thread is built once, for the scenarios that read
	// it or fork it, when the first of them runs.
	var deep *thread.Thread
	deepThread := func(ctx context.Context) (*thread.Thread, error) {
		if deep != nil {
			return deep, nil
		}
		th, err := b.db.Load(ctx, bytes.NewReader(deepDocument(1000)), thread.LoadOptions{})
		if err != nil {
			return nil, fmt.Errorf("set up a thread of 1,000 messages: %w", err)
		}
		deep = th
		return th, nil
	}
	appendLoop := func(msgs ...message.Message) func(ctx context.Context) (benchResult, error) {
		return func(ctx context.Context) (benchResult, error) {
			th, err := b.db.Create(ctx, thread.CreateOptions{Title: "bench: appends"})
			if err != nil {
				return benchResult{}, err
			}
			return b.loop(ctx, func(ctx context.Context) error {
				_, err := th.Append(ctx, msgs...)
				return err
			})
		}
	}
	return []scenario{
		{"append one message", appendLoop(message.User(benchUser))},
		{"chat turn (user + assistant)", appendLoop(message.User(benchUser), message.Assistant(benchAssistant))},
		{"fork at head (1,000 messages)", func(ctx context.Context) (benchResult, error) {
			th, err := deepThread(ctx)
			if err != nil {
				return benchResult{}, err
			}
			// The forks are deleted a thousand at a time, off the clock, so
			// that what is measured is a fork, not a store growing with it.
			var forks []*thread.Thread
			r, err := b.loop(ctx, func(ctx context.Context) error {
				f, err := th.Fork(ctx, thread.ForkOptions{})
				if err == nil {
					forks = append(forks, f)
				}
				return err
			}, func(ctx context.Context) error {
				for _, f := range forks {
					if err := f.Delete(ctx); err != nil {
						return err
					}
				}
				forks = forks[:0]
				return nil
			})
			return r, err
		}},
		{"last 50 of 1,000 messages", func(ctx context.Context) (benchResult, error) {
			th, err := deepThread(ctx)
			if err != nil {
				return benchResult{}, err
			}
			return b.loop(ctx, func(ctx context.Context) error {
				msgs, err := th.Messages(ctx, thread.ReadOptions{Last: 50})
				if err == nil && len(msgs) != 50 {
					err = fmt.Errorf("read %d messages, not 50", len(msgs))
				}
				return err
			})
		}},
		{"view of 8,000 tokens (1,000 messages)", func(ctx context.Context) (benchResult, error) {
			th, err := deepThread(ctx)
			if err != nil {
				return benchResult{}, err
			}
			opts := thread.ViewOptions{Model: "gpt-4o", Budget: 8000}
			if _, err := th.View(ctx, opts); err != nil { // warms the token cache
				return benchResult{}, err
			}
			return b.loop(ctx, func(ctx context.Context) error {
				_, err := th.View(ctx, opts)
				return err
			})
		}},
		{fmt.Sprintf("concurrent appends (%d writers, %d threads)", writers, writers), func(ctx context.Context) (benchResult, error) {
			return b.concurrent(ctx, writers, writers)
		}},
		{fmt.Sprintf("concurrent appends (%d writers, 1 thread)", writers), func(ctx context.Context) (benchResult, error) {
			return b.concurrent(ctx, writers, 1)
		}},
	}
}

// deepDocument returns the portable document, with history, of a thread
// of n commits of one 400-byte user message each, as n appends would have
// made it: loading it writes the whole thread in one batch, where n appends
// would cost n round trips to the store.
func deepDocument(n int) []byte {
	type commit struct {
		Parent   int               `json:"parent"`
		Op       thread.Op         `json:"op"`
		Time     time.Time         `json:"time"`
		Messages []message.Message `json:"messages"`
	}
	type entry struct {
		Version int64     `json:"version"`
		Commit  int       `json:"commit"`
		Op      thread.Op `json:"op"`
		Time    time.Time `json:"time"`
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	var doc struct {
		Format string `json:"format"`
		Thread struct {
			ID        string      `json:"id"`
			Kind      thread.Kind `json:"kind"`
			Title     string      `json:"title"`
			CreatedAt time.Time   `json:"created_at"`
			UpdatedAt time.Time   `json:"updated_at"`
		} `json:"thread"`
		Messages []message.Message `json:"messages"`
		History  struct {
			Version int64    `json:"version"`
			Head    int      `json:"head"`
			Commits []commit `json:"commits"`
			Entries []entry  `json:"entries"`
		} `json:"history"`
	}
	doc.Format = thread.DocumentFormat
	doc.Thread.ID, doc.Thread.Kind, doc.Thread.Title = thread.NewThreadID(), thread.KindUndetermined, "bench: 1,000 messages"
	doc.Thread.CreatedAt, doc.Thread.UpdatedAt = now, now
	h := &doc.History
	h.Version, h.Head = int64(n)+1, n-1
	h.Entries = append(h.Entries, entry{Version: 1, Commit: -1, Op: thread.OpCreate, Time: now})
	for i := range n {
		m := message.User(benchText)
		m.ID, m.CreatedAt = message.NewIDAt(now), now
		doc.Messages = append(doc.Messages, m)
		h.Commits = append(h.Commits, commit{Parent: i - 1, Op: thread.OpAppend, Time: now, Messages: []message.Message{m}})
		h.Entries = append(h.Entries, entry{Version: int64(i) + 2, Commit: i, Op: thread.OpAppend, Time: now})
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err) // plain values: cannot fail
	}
	return b
}

// loop runs op over and over for the duration and measures each call.
// chores, when given, run after every 1,000 calls and at the end, off the
// clock (their time is not counted in the throughput).
func (b *bencher) loop(ctx context.Context, op func(context.Context) error, chores ...func(context.Context) error) (benchResult, error) {
	var lat []time.Duration
	var off time.Duration
	doChores := func() error {
		t0 := time.Now()
		defer func() { off += time.Since(t0) }()
		for _, ch := range chores {
			if err := ch(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	start := time.Now()
	for time.Since(start) < b.d {
		if err := ctx.Err(); err != nil {
			return benchResult{}, err
		}
		t0 := time.Now()
		if err := op(ctx); err != nil {
			return benchResult{}, err
		}
		lat = append(lat, time.Since(t0))
		if len(lat)%1000 == 0 {
			if err := doChores(); err != nil {
				return benchResult{}, err
			}
		}
	}
	elapsed := time.Since(start) - off
	if err := doChores(); err != nil {
		return benchResult{}, err
	}
	return summarize(lat, elapsed), nil
}

// concurrent has writers goroutines append 400-byte messages for the
// duration, spread over threads threads, each writer through a handle of
// its own.
func (b *bencher) concurrent(ctx context.Context, writers, threads int) (benchResult, error) {
	handles := make([]*thread.Thread, writers)
	for i := range handles {
		var err error
		if i < threads {
			handles[i], err = b.db.Create(ctx, thread.CreateOptions{Title: "bench: concurrent appends"})
		} else {
			handles[i], err = b.db.Thread(ctx, handles[i%threads].ID())
		}
		if err != nil {
			return benchResult{}, err
		}
	}
	var (
		mu   sync.Mutex
		lat  []time.Duration
		errs []error
		wg   sync.WaitGroup
	)
	start := time.Now()
	for _, th := range handles {
		wg.Go(func() {
			var mine []time.Duration
			var err error
			for time.Since(start) < b.d && ctx.Err() == nil {
				t0 := time.Now()
				if _, err = th.Append(ctx, message.User(benchText)); err != nil {
					break
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return benchResult{}, err
	}
	return summarize(lat, elapsed), nil
}

// summarize makes a result of the latencies of the operations done in
// elapsed.
func summarize(lat []time.Duration, elapsed time.Duration) benchResult {
	if len(lat) == 0 {
		return benchResult{}
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Nanoseconds()) / 1000
	}
	return benchResult{Ops: len(lat), OpsPerSec: float64(len(lat)) / elapsed.Seconds(), P50Micros: pct(0.50), P99Micros: pct(0.99)}
}

// cleanup deletes every thread of the bench tenant and returns how many.
// The listing is read first and the threads deleted after, newest first
// (forks before the threads they were forked from).
func (b *bencher) cleanup(ctx context.Context) (int, error) {
	var ids []string
	for th, err := range b.db.Threads(ctx, thread.ListOptions{}) {
		if err != nil {
			return 0, err
		}
		ids = append(ids, th.ID())
	}
	n := 0
	for _, id := range slices.Backward(ids) {
		if err := b.db.Delete(ctx, id); err != nil && !errors.Is(err, thread.ErrNotFound) {
			return n, err
		}
		n++
	}
	return n, nil
}
