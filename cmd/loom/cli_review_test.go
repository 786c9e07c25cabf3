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

// goStyleFlags looked flags up in one map of every command's flags, where
// threads show's --version V hid the root's bool --version: -version took
// -json as its value and left it to pflag as the shorthands j, s, o, n
// (exit 2; before cobra it was 0). A long flag no command has was left as
// shorthands too: "unknown flag -b" for -bogus.
func TestReviewSingleDashFlagsAreTheCommandsOwn(t *testing.T) {
	for _, args := range [][]string{{"-version", "-json"}, {"--version", "-json"}} {
		var v versionJSON
		loom(t, args...).ok(t).decode(t, &v)
		if v.Module == "" {
			t.Errorf("loom %s printed %+v", strings.Join(args, " "), v)
		}
	}
	r := loom(t, "threads", "show", "th", "-version", "2", "-json", "--store", "memory://")
	if r.code != 1 || !strings.Contains(r.stderr, `thread "th" not found`) {
		t.Errorf("threads show th -version 2 -json: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"threads", "create", "-bogus"}, "unknown flag --bogus"},
		{[]string{"threads", "create", "-list"}, "unknown flag --list"},
		{[]string{"-bogus", "threads", "list"}, "unknown global flag --bogus"},
		{[]string{"threads", "append", "th", "-5"}, "unknown flag -5"},
	} {
		r := loom(t, append(c.args, "--store", "memory://")...)
		if r.code != 2 || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("loom %s: exit %d, stderr %q; want 2 and %q", strings.Join(c.args, " "), r.code, r.stderr, c.msg)
		}
	}
}

func TestGoStyleFlags(t *testing.T) {
	root := (&Env{Getenv: func(string) string { return "" }}).newRoot(new(error))
	for _, c := range []struct{ in, want string }{
		{"-version -json", "--version --json"},
		{"threads show th -version 2 -json", "threads show th --version 2 --json"},
		{"-store memory:// threads list -limit=5", "--store memory:// threads list --limit=5"},
		{"threads create -title -json", "threads create --title -json"},
		{"export th -ofile.json -history", "export th -ofile.json --history"},
		{"threads append th -- -json", "threads append th -- -json"},
		{"import - -id x", "import - --id x"},
		{"help threads -help", "help threads --help"},
		{"-h threads list -json", "-h threads list --json"},
	} {
		if got := strings.Join(goStyleFlags(root, strings.Fields(c.in)), " "); got != c.want {
			t.Errorf("goStyleFlags(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}
