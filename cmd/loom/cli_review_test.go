package main

// Found by the review of issue 17: each test failed before its fix.

import (
	"strings"
	"testing"
)

// The old parser took Go-style single-dash long flags (-json, -limit 5,
// -store URL) and handled -help explicitly (Run: a == "-help"); on cobra
// they are shorthand clusters: "unknown flag -j", "unknown flag -e".
func TestReviewSingleDashLongFlagsStillWork(t *testing.T) {
	for _, args := range [][]string{
		{"-help"},
		{"threads", "-help"},
		{"threads", "list", "-help"},
		{"-version"},
		{"-store", "memory://", "threads", "list"},
		{"threads", "list", "-json", "--store", "memory://"},
		{"threads", "list", "-limit", "5", "--store", "memory://"},
	} {
		if r := loom(t, args...); r.code != 0 {
			t.Errorf("loom %s: exit %d (before the change: 0)\nstderr: %s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}

// An unknown command followed by -h used to be a usage error (exit 2,
// "unknown command"); cobra prints the parent's help and exits 0.
func TestReviewUnknownCommandWithHelpFlagIsAUsageError(t *testing.T) {
	for _, args := range [][]string{
		{"bogus", "-h"},
		{"bogus", "--help"},
		{"threads", "bogus", "--help"},
	} {
		if r := loom(t, args...); r.code != 2 {
			t.Errorf("loom %s: exit %d, want 2 (a usage error, as before)\nstdout: %.80q", strings.Join(args, " "), r.code, r.stdout)
		}
	}
}

// "loom -- threads list" says: unknown command "threads" / Did you mean
// "threads"? -- a suggestion of the very name it calls unknown.
func TestReviewNoSuggestionOfTheSameName(t *testing.T) {
	r := loom(t, "--", "threads", "list")
	if strings.Contains(r.stderr, `unknown command "threads"`) && strings.Contains(r.stderr, `Did you mean "threads"?`) {
		t.Errorf("loom -- threads list:\n%s", r.stderr)
	}
}

// main.go's doc: "with --json, or when the output is not a terminal, there
// are no bars". migrationBar ignores --json and draws on stderr anyway.
func TestReviewNoMigrationBarWithJSON(t *testing.T) {
	store, _ := oldFileStore(t)
	r := loomWith(t, loomOpts{terminal: true}, "threads", "list", "--json", "--store", store).ok(t)
	if strings.Contains(r.stderr, "\r") || strings.Contains(r.stderr, "migrating") {
		t.Errorf("with --json a migration drew %q on stderr", r.stderr)
	}
}
