package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// The JSON shapes of --json. Names are snake_case, as in the portable
// document and the wire format; times are RFC 3339.

// recordJSON is a thread's record.
type recordJSON struct {
	ID         string            `json:"id"`
	Tenant     string            `json:"tenant,omitzero"`
	Kind       thread.Kind       `json:"kind"`
	Title      string            `json:"title,omitzero"`
	Labels     map[string]string `json:"labels,omitzero"`
	Head       string            `json:"head,omitzero"`
	Version    int64             `json:"version"`
	CreatedAt  time.Time         `json:"created_at"`
	UpdatedAt  time.Time         `json:"updated_at"`
	ForkedFrom thread.ForkPoint  `json:"forked_from,omitzero"`
}

func toRecordJSON(r thread.Record) recordJSON {
	return recordJSON{ID: r.ID, Tenant: r.Tenant, Kind: r.Kind, Title: r.Title, Labels: r.Labels, Head: r.Head,
		Version: r.Version, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, ForkedFrom: r.ForkedFrom}
}

// historyJSON is a history entry.
type historyJSON struct {
	Version int64     `json:"version"`
	Commit  string    `json:"commit"`
	Op      thread.Op `json:"op"`
	Time    time.Time `json:"time"`
}

// checkpointJSON is a checkpoint.
type checkpointJSON struct {
	Thread    string    `json:"thread"`
	Name      string    `json:"name"`
	Commit    string    `json:"commit"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
}

func toCheckpointJSON(cp thread.Checkpoint) checkpointJSON {
	return checkpointJSON{Thread: cp.Thread, Name: cp.Name, Commit: cp.Commit, Version: cp.Version, CreatedAt: cp.CreatedAt}
}

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONLine writes v as one line of JSON lines.
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// table writes aligned columns for people.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = oneLine(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// oneLine keeps a cell on one line.
func oneLine(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ", "\t", " ").Replace(s)
}

// formatTime writes a time for people, in local time to the second.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// formatLabels writes labels as k=v,k=v in key order.
func formatLabels(l map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+l[k])
	}
	return strings.Join(parts, ",")
}

// printRecord writes a thread's record for people, one field a line.
func printRecord(w io.Writer, r thread.Record) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "thread\t%s\n", r.ID)
	if r.Title != "" {
		fmt.Fprintf(tw, "title\t%s\n", oneLine(r.Title))
	}
	if r.Tenant != "" {
		fmt.Fprintf(tw, "tenant\t%s\n", r.Tenant)
	}
	fmt.Fprintf(tw, "kind\t%s\n", r.Kind)
	fmt.Fprintf(tw, "version\t%d\n", r.Version)
	fmt.Fprintf(tw, "created\t%s\n", formatTime(r.CreatedAt))
	fmt.Fprintf(tw, "updated\t%s\n", formatTime(r.UpdatedAt))
	if len(r.Labels) > 0 {
		fmt.Fprintf(tw, "labels\t%s\n", oneLine(formatLabels(r.Labels)))
	}
	if f := r.ForkedFrom; f.Thread != "" {
		at := "its head"
		if f.Message != "" {
			at = f.Message
		}
		fmt.Fprintf(tw, "forked from\t%s at %s\n", f.Thread, at)
	}
	tw.Flush()
}

// printState writes a state map for people, one key a line.
func printState(w io.Writer, st map[string]json.RawMessage) {
	if len(st) == 0 {
		return
	}
	fmt.Fprintf(w, "state:\n")
	for _, k := range slices.Sorted(maps.Keys(st)) {
		fmt.Fprintf(w, "  %s = %s\n", k, clip(string(st[k]), 200))
	}
}

// printMessages writes messages for people: a header line per message
// (role, author, id, time), then its contents indented.
func printMessages(w io.Writer, msgs []message.Message, elided []string) {
	for i, m := range msgs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		head := string(m.Role)
		if m.AuthorName != "" {
			head += " (" + m.AuthorName + ")"
		}
		if m.ID != "" {
			head += "  " + m.ID
		}
		if !m.CreatedAt.IsZero() {
			head += "  " + formatTime(m.CreatedAt)
		}
		if slices.Contains(elided, m.ID) && m.ID != "" {
			head += "  [results elided]"
		}
		fmt.Fprintf(w, "── %s\n", head)
		for _, c := range m.Contents {
			for _, line := range strings.Split(formatContent(c), "\n") {
				fmt.Fprintf(w, "   %s\n", line)
			}
		}
	}
}

// formatContent writes one content of a message for people.
func formatContent(c message.Content) string {
	switch c := c.(type) {
	case message.Text:
		return c.Text
	case message.FunctionCall:
		return fmt.Sprintf("→ %s(%s)  [%s]", c.Name, c.Arguments, c.CallID)
	case message.FunctionResult:
		if c.IsError {
			return fmt.Sprintf("← [%s] error: %s", c.CallID, c.Result)
		}
		return fmt.Sprintf("← [%s] %s", c.CallID, c.Result)
	case message.Reasoning:
		if c.Text == "" {
			return "(reasoning)"
		}
		return "(reasoning) " + c.Text
	case message.Data:
		what := c.MediaType
		if c.Name != "" {
			what += " " + c.Name
		}
		if c.URI != "" {
			what += " " + clip(c.URI, 80)
		} else {
			what += " " + strconv.Itoa(len(c.Data)) + " bytes"
		}
		return "[data " + strings.TrimSpace(what) + "]"
	case message.Usage:
		return fmt.Sprintf("(usage: %d in, %d out, %d total)", c.InputTokens, c.OutputTokens, c.TotalTokens)
	case message.Error:
		if c.Code != "" {
			return fmt.Sprintf("error %s: %s", c.Code, c.Message)
		}
		return "error: " + c.Message
	default:
		return "[" + c.Type() + "]"
	}
}

// clip shortens s to about n bytes.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 { // not inside a rune
		n--
	}
	return s[:n] + "…"
}

// plural writes "1 thing" or "n things".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
