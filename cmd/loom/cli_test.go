package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The single-dash spellings of long flags that loom took when it parsed
// with package flag (-json, -limit 5, -store URL, -help) still work, for
// one release, with a deprecation note on stderr that names each of them
// and its two-dash spelling; the two-dash spellings draw no note.
func TestSingleDashAliases(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "th.json")
	store := sqliteStore(t)
	for _, c := range []struct {
		args    []string
		aliases []string
	}{
		{[]string{"-help"}, []string{"-help"}},
		{[]string{"threads", "-help"}, []string{"-help"}},
		{[]string{"threads", "list", "-help"}, []string{"-help"}},
		{[]string{"-version"}, []string{"-version"}},
		{[]string{"-store", "memory://", "threads", "list"}, []string{"-store"}},
		{[]string{"threads", "list", "-json", "--store", "memory://"}, []string{"-json"}},
		{[]string{"threads", "list", "-limit", "5", "--store", "memory://"}, []string{"-limit"}},
		{[]string{"threads", "create", "-id", "th_a", "-title=-json", "-label", "k=v", "-store", store}, []string{"-id", "-title", "-label", "-store"}},
		{[]string{"threads", "append", "th_a", "-role", "assistant", "-store", store, "hello"}, []string{"-role", "-store"}},
		{[]string{"export", "th_a", "-history", "-output", out, "-store", store}, []string{"-history", "-output", "-store"}},
		{[]string{"import", out, "-id", "th_b", "-store", store, "-json"}, []string{"-id", "-store", "-json"}},
		{[]string{"copy", "-from", store, "-to", "memory://", "-thread", "th_a"}, []string{"-from", "-to", "-thread"}},
		{[]string{"items", "list", "-dir", t.TempDir(), "-all"}, []string{"-dir", "-all"}},
	} {
		r := loom(t, c.args...)
		line := strings.Join(c.args, " ")
		if r.code != 0 {
			t.Errorf("loom %s: exit %d\nstderr: %s", line, r.code, r.stderr)
			continue
		}
		long := make([]string, len(c.aliases))
		for i, a := range c.aliases {
			long[i] = "-" + a
		}
		note := "loom: " + strings.Join(c.aliases, ", ")
		if !strings.HasPrefix(r.stderr, note) || !strings.Contains(r.stderr, "deprecated") ||
			!strings.Contains(r.stderr, "write "+strings.Join(long, ", ")+"\n") {
			t.Errorf("loom %s: stderr %q, want the note %q… write %s", line, r.stderr, note, strings.Join(long, ", "))
		}
	}
	if r := loom(t, "threads", "show", "th_a", "--json", "--store", store).ok(t); r.stderr != "" {
		t.Errorf("the two-dash spellings drew %q on stderr", r.stderr)
	}
	// A shell asking for completions gets no note.
	if r := loom(t, cobra.ShellCompRequestCmd, "threads", "list", "-store", store, "--li").ok(t); strings.Contains(r.stderr, "deprecated") || !strings.Contains(r.stdout, "--limit") {
		t.Errorf("completion with -store: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	// -title=-json made the title "-json", not a flag.
	if r := loom(t, "threads", "show", "th_a", "--store", store).ok(t); !strings.Contains(r.stdout, "-json") {
		t.Errorf("the title is not -json:\n%s", r.stdout)
	}
}

// Each single-dash flag is looked up on the command the words before it
// name: threads show's --version V is not the root's bool --version, which
// would otherwise take -json as its value and leave it to pflag as the
// shorthands j, s, o and n.
func TestSingleDashFlagsAreTheCommandsOwn(t *testing.T) {
	t.Parallel()
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
}

// An unknown flag, in either spelling, is a usage error (exit 2) that
// names it and shows the command's usage line; a single-dash word that is
// no flag of the command is named as the long flag it looks like, not as
// its first letter.
func TestUnknownFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args       []string
		msg, usage string
	}{
		{[]string{"threads", "create", "--bogus"}, "loom: unknown flag --bogus\n", "usage: loom threads create "},
		{[]string{"threads", "create", "-bogus"}, "loom: unknown flag --bogus\n", "usage: loom threads create "},
		{[]string{"threads", "create", "-list"}, "loom: unknown flag --list\n", "usage: loom threads create "},
		{[]string{"threads", "list", "-x"}, "loom: unknown flag -x\n", "usage: loom threads list "},
		{[]string{"export", "th", "-ox", "-q"}, "loom: unknown flag -q\n", "usage: loom export "},
		{[]string{"threads", "append", "th", "-5"}, "loom: unknown flag -5\n", "usage: loom threads append "},
		{[]string{"-bogus", "threads", "list"}, "loom: unknown global flag --bogus (the global flags are --store, --tenant, --json)\n", "Run 'loom help'"},
		{[]string{"--bogus", "threads", "list"}, "loom: unknown global flag --bogus", "Run 'loom help'"},
	} {
		r := loom(t, append(c.args, "--store", "memory://")...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, c.msg) || !strings.Contains(r.stderr, c.usage) {
			t.Errorf("loom %s: exit %d, stderr %q; want 2 and %q, %q", strings.Join(c.args, " "), r.code, r.stderr, c.msg, c.usage)
		}
	}
}

// A flag's value that is missing or does not parse is a usage error that
// names the flag.
func TestFlagValueErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"threads", "list", "--store"}, "loom: --store needs a value\n"},
		{[]string{"export", "th", "--store", "memory://", "-o"}, "loom: -o needs a value\n"},
		{[]string{"threads", "list", "--store", "memory://", "--limit", "many"}, `loom: invalid --limit "many": parse error` + "\n"},
		{[]string{"threads", "list", "--store", "memory://", "--limit", "99999999999999999999"}, `loom: invalid --limit "99999999999999999999": value out of range` + "\n"},
		{[]string{"threads", "list", "--store", "memory://", "--json=maybe"}, `loom: invalid --json "maybe": parse error` + "\n"},
		{[]string{"bench", "--store", "memory://", "--duration", "soon"}, `loom: invalid --duration "soon": parse error` + "\n"},
	} {
		r := loom(t, c.args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, c.msg) {
			t.Errorf("loom %s: exit %d, stderr %q; want 2 and %q", strings.Join(c.args, " "), r.code, r.stderr, c.msg)
		}
	}
}

// A command's help lists its flags with their values' names, the
// shorthand beside the long name, and the global flags apart.
func TestCommandHelpListsFlags(t *testing.T) {
	t.Parallel()
	r := loom(t, "export", "--help").ok(t)
	for _, s := range []string{
		"Usage: loom export ID [--history] [-o FILE]\n",
		"\nFlags:\n  --history ", "\n  -o, --output FILE  write to FILE instead of stdout",
		"\nGlobal flags:\n", "\n  --json ", "\n  --store URL  the store URL: ", "\n  --tenant T ",
	} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("export --help lacks %q:\n%s", s, r.stdout)
		}
	}
	r = loom(t, "serve", "--help").ok(t)
	for _, s := range []string{"--allow-origin ORIGIN  ", "--shutdown-timeout duration  ", "(default 30s)", "--max-body int  "} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("serve --help lacks %q:\n%s", s, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "`") {
		t.Errorf("serve --help shows a backquote:\n%s", r.stdout)
	}
}

// An unknown command followed by -h is a usage error (exit 2, "unknown
// command"): cobra alone prints the parent's help and exits 0.
func TestHelpAfterUnknownCommandIsAUsageError(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"bogus", "-h"},
		{"bogus", "--help"},
		{"threads", "bogus", "--help"},
	} {
		if r := loom(t, args...); r.code != 2 {
			t.Errorf("loom %s: exit %d, want 2\nstdout: %.80q", strings.Join(args, " "), r.code, r.stdout)
		}
	}
}

// "loom -- threads list" does not say unknown command "threads" and then
// suggest "threads".
func TestNoSuggestionOfTheSameName(t *testing.T) {
	t.Parallel()
	r := loom(t, "--", "threads", "list")
	if strings.Contains(r.stderr, `unknown command "threads"`) && strings.Contains(r.stderr, `Did you mean "threads"?`) {
		t.Errorf("loom -- threads list:\n%s", r.stderr)
	}
}

func TestSingleDashAliasesRewrite(t *testing.T) {
	t.Parallel()
	root := (&Env{Getenv: func(string) string { return "" }}).newRoot(new(error))
	for _, c := range []struct{ in, want, aliases string }{
		{"-version -json", "--version --json", "-version -json"},
		{"threads show th -version 2 -json", "threads show th --version 2 --json", "-version -json"},
		{"-store memory:// threads list -limit=5", "--store memory:// threads list --limit=5", "-store -limit"},
		{"threads create -title -json", "threads create --title -json", "-title"},
		{"export th -ofile.json -history", "export th -ofile.json --history", "-history"},
		{"export th -output file.json", "export th --output file.json", "-output"},
		{"threads append th -- -json", "threads append th -- -json", ""},
		{"import - -id x", "import - --id x", "-id"},
		{"help threads -help", "help threads --help", "-help"},
		{"-h threads list -json", "-h threads list --json", "-json"},
		{"threads list --json --limit 5", "threads list --json --limit 5", ""},
		{"threads create -bogus x", "threads create --bogus x", ""},
	} {
		out, aliases := singleDashAliases(root, strings.Fields(c.in))
		if got := strings.Join(out, " "); got != c.want {
			t.Errorf("singleDashAliases(%s) = %s, want %s", c.in, got, c.want)
		}
		if !slices.Equal(aliases, strings.Fields(c.aliases)) {
			t.Errorf("singleDashAliases(%s) aliases %q, want %q", c.in, aliases, c.aliases)
		}
	}
}
