package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Run finds the command args name and runs it: the command table (commands)
// becomes a cobra command tree, which parses the flags, finds the command,
// prints help and makes the completions.
//
// Long flags written with one dash (-json, -store URL), as loom took them
// when it parsed with package flag, are read as their two-dash spelling,
// with a deprecation note on stderr (singleDashAliases) unless a shell asks
// for completions.
func (e *Env) Run(ctx context.Context, args []string) error {
	var helpErr error
	root := e.newRoot(&helpErr)
	rewritten, aliases := singleDashAliases(root, args)
	// No note for a shell asking for completions (loom __complete …).
	if len(aliases) > 0 && !strings.HasPrefix(args[0], cobra.ShellCompRequestCmd) {
		e.deprecated(aliases)
	}
	root.SetArgs(rewritten)
	if err := root.ExecuteContext(ctx); err != nil {
		return err
	}
	return helpErr
}

// deprecated notes on stderr, in one line, that the single-dash spellings
// of long flags in aliases (-json) will go, and how to write them.
func (e *Env) deprecated(aliases []string) {
	long := make([]string, len(aliases))
	for i, a := range aliases {
		long[i] = "-" + a
	}
	verb := "is"
	if len(aliases) > 1 {
		verb = "are"
	}
	fmt.Fprintf(e.Stderr, "loom: %s %s deprecated and will stop working in a later release: write %s\n",
		strings.Join(aliases, ", "), verb, strings.Join(long, ", "))
}

// singleDashAliases rewrites the single-dash long flags that loom took when
// it parsed with package flag (-json, -limit 5, -store=URL, -help,
// -version) as pflag reads them (--json, …), up to "--", and returns the
// aliases it rewrote as they were written, without their values (-json,
// -store). pflag would read -json as the shorthands j, s, o and n.
//
// Each flag is looked up on the command the words before it name, as
// cobra finds it (the root's bool -version is not threads show's
// -version V). A word that is the value of the flag before it (--title
// -json) stays as it is, and so does a cluster of the command's shorthands
// (-oFILE) and a word that starts with no letter (-5). A single-dash word
// that is no flag of the command (-bogus) is rewritten too but not
// returned: pflag then reports the unknown flag --bogus, not -b.
func singleDashAliases(root *cobra.Command, args []string) (out, aliases []string) {
	out = slices.Clone(args)
	cmd := root
	naming := true // no positional argument yet: a word may name a subcommand of cmd
	value := false // args[i] is the value of the flag before it
	for i, a := range args {
		switch {
		case a == "--":
			return out, aliases
		case value:
			value = false
			continue
		case !strings.HasPrefix(a, "-") || a == "-":
			if naming {
				if sub := subcommand(cmd, a); sub != nil {
					cmd = sub
					continue
				}
			}
			naming = false
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := findFlag(cmd, name)
		if f == nil && (name == "" || !isLetter(name[0]) || cmd.Flags().ShorthandLookup(name[:1]) != nil) {
			continue // not a long flag: -5, or a cluster of shorthands
		}
		if len(name) > 1 && !strings.HasPrefix(a, "--") {
			out[i] = "-" + a
			if f != nil {
				aliases = append(aliases, "-"+name)
			}
		}
		// An unknown flag takes a value, as cobra reads it when it finds
		// the command.
		value = !hasValue && (f == nil || f.NoOptDefVal == "")
	}
	return out, aliases
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// subcommand returns the subcommand of cmd called name, or nil.
func subcommand(cmd *cobra.Command, name string) *cobra.Command {
	for _, sub := range cmd.Commands() {
		if sub.Name() == name {
			return sub
		}
	}
	return nil
}

// findFlag returns the flag name of cmd, its own or one it inherits; help
// (-h) is every command's bool flag.
func findFlag(cmd *cobra.Command, name string) *pflag.Flag {
	if name == "help" || name == "h" {
		return &pflag.Flag{Name: "help", NoOptDefVal: "true"}
	}
	if f := cmd.Flags().Lookup(name); f != nil {
		return f
	}
	for c := cmd; c != nil; c = c.Parent() {
		if f := c.PersistentFlags().Lookup(name); f != nil {
			return f
		}
	}
	return nil
}

// newRoot builds the cobra command tree of the command table: a group
// command for each name in groups, and a command for each entry whose flags
// are the entry's Command's flag set, bound to its fields.
//
// A help flag on a root or group followed by a word that names no command
// (loom bogus --help) is a usage error, set in *helpErr: cobra would print
// the help and succeed.
func (e *Env) newRoot(helpErr *error) *cobra.Command {
	global := &base{Env: e}
	root := &cobra.Command{
		Use:                        "loom",
		Short:                      "keep the threads of AI agents: durable, cheap to fork, checkpoint and roll back",
		Args:                       cobra.ArbitraryArgs,
		SilenceErrors:              true,
		SilenceUsage:               true,
		DisableFlagsInUseLine:      true,
		SuggestionsMinimumDistance: 2,
		CompletionOptions:          cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetIn(e.Stdin)
	root.SetOut(e.Stdout)
	root.SetErr(e.Stderr)
	// The global flags, for before the command's name; every command has
	// them among its own flags too, bound to its fields.
	gfs := global.flagSet()
	gfs.VisitAll(valueName)
	root.PersistentFlags().AddFlagSet(gfs)
	version := root.Flags().Bool("version", false, "print loom's version")
	root.Flags().MarkHidden("version")
	root.SetFlagErrorFunc(flagError)
	root.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		if pos := cmd.Flags().Args(); len(pos) > 0 && cmd.HasSubCommands() {
			if cmd != root {
				e.printGroupHelp(e.Stderr, cmd.Name())
			}
			*helpErr = unknownCommand(cmd, pos)
			return
		}
		if cmd == root {
			e.printTopHelp(e.Stdout)
		} else {
			e.printGroupHelp(e.Stdout, cmd.Name())
		}
	})
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if *version {
			return e.Run(cmd.Context(), []string{"version", "--json=" + strconv.FormatBool(global.JSON)})
		}
		if len(args) == 0 {
			e.printTopHelp(e.Stderr)
			return &usageError{msg: "no command given"}
		}
		return unknownCommand(cmd, args)
	}

	parents := map[string]*cobra.Command{}
	for _, s := range commands {
		if group, _, ok := strings.Cut(s.Name, " "); ok && parents[group] == nil {
			parents[group] = e.newGroup(group)
			root.AddCommand(parents[group])
		}
	}
	for i := range commands {
		s := &commands[i]
		parent, name := root, s.Name
		if group, sub, ok := strings.Cut(s.Name, " "); ok {
			parent, name = parents[group], sub
		}
		cmd := e.newCommand(s, name)
		parent.AddCommand(cmd)
		if s.Name == "help" {
			cmd.ValidArgsFunction = completeCommands
			root.SetHelpCommand(cmd)
		}
	}
	return root
}

// newGroup makes the command that holds the subcommands of group. Alone or
// followed by an unknown name it is a usage error.
func (e *Env) newGroup(group string) *cobra.Command {
	return &cobra.Command{
		Use:                        group + " COMMAND [ARGS]",
		Short:                      groups[group],
		Args:                       cobra.ArbitraryArgs,
		DisableFlagsInUseLine:      true,
		SuggestionsMinimumDistance: 2,
		RunE: func(cmd *cobra.Command, args []string) error {
			e.printGroupHelp(e.Stderr, group)
			if len(args) == 0 {
				return &usageError{msg: group + " needs a subcommand"}
			}
			return unknownCommand(cmd, args)
		},
	}
}

// newCommand makes the cobra command of the table's entry s, called name
// under its group: its Summary, Help and Examples are its Short, Long and
// Example, its Command's flags its flags, and its Run what it runs with the
// positional arguments.
func (e *Env) newCommand(s *spec, name string) *cobra.Command {
	cmd := &cobra.Command{
		Use:                   strings.TrimSpace(name + " " + s.Synopsis),
		Short:                 s.Summary,
		Long:                  capitalize(s.Summary) + ".",
		ValidArgs:             s.Words,
		DisableFlagsInUseLine: true,
	}
	if s.Help != "" {
		cmd.Long += "\n\n" + s.Help
	}
	if len(s.Examples) > 0 {
		cmd.Example = "  " + strings.Join(s.Examples, "\n  ")
	}
	c := s.New(base{Env: e, name: s.Name, cmd: cmd})
	fs := c.Flags()
	fs.VisitAll(valueName)
	cmd.Flags().AddFlagSet(fs)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return c.Run(cmd.Context(), args)
	}
	cmd.SetHelpFunc(func(*cobra.Command, []string) {
		(&base{Env: e, name: s.Name}).printHelp(e.Stdout, fs)
	})
	return cmd
}

// valueNameKey is the annotation that holds the name of a flag's value in
// help (URL in --store URL).
const valueNameKey = "loom_value_name"

// valueName moves the backquoted name of f's value (`URL`) from its usage,
// which completion shows, to an annotation for help: "--store URL  the
// store URL: …".
func valueName(f *pflag.Flag) {
	name, usage := pflag.UnquoteUsage(f)
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[valueNameKey] = []string{name}
	f.Usage = usage
}

// completeCommands offers the commands that may follow args, for loom help.
func completeCommands(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	parent, rest, err := cmd.Root().Find(args)
	if err != nil || len(rest) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var words []cobra.Completion
	for _, sub := range parent.Commands() {
		if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
			words = append(words, cobra.CompletionWithDesc(sub.Name(), sub.Short))
		}
	}
	return words, cobra.ShellCompDirectiveNoFileComp
}

// unknownCommand is the usage error for args[0] under cmd, with cobra's
// suggestions: loom thread list → Did you mean "threads"?
func unknownCommand(cmd *cobra.Command, args []string) *usageError {
	name := strings.TrimPrefix(strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()), " ")
	name = strings.TrimSpace(name + " " + args[0])
	if subcommand(cmd, args[0]) != nil {
		// It is a command, given after "--", which ends the flags and the
		// command's name.
		return &usageError{msg: fmt.Sprintf("%q after \"--\": a command's name comes before it", name)}
	}
	err := &usageError{msg: fmt.Sprintf("unknown command %q", name)}
	if sugg := cmd.SuggestionsFor(args[0]); len(sugg) > 0 {
		quoted := make([]string, len(sugg))
		for i, s := range sugg {
			quoted[i] = strconv.Quote(s)
		}
		err.hint = "Did you mean " + strings.Join(quoted, " or ") + "?"
	}
	return err
}

// flagError turns pflag's errors into usage errors worded as loom's.
func flagError(cmd *cobra.Command, err error) error {
	name := strings.TrimPrefix(strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()), " ")
	var notExist *pflag.NotExistError
	var invalid *pflag.InvalidValueError
	var noValue *pflag.ValueRequiredError
	msg := err.Error()
	switch {
	case errors.As(err, &noValue):
		flag := "--" + noValue.GetSpecifiedName()
		if noValue.GetSpecifiedShortnames() != "" {
			flag = "-" + noValue.GetSpecifiedName()
		}
		msg = flag + " needs a value"
	case errors.As(err, &notExist):
		flag := "--" + notExist.GetSpecifiedName()
		if notExist.GetSpecifiedShortnames() != "" {
			flag = "-" + notExist.GetSpecifiedName()
		}
		if cmd == cmd.Root() {
			msg = fmt.Sprintf("unknown global flag %s (the global flags are --store, --tenant, --json)", flag)
		} else {
			msg = "unknown flag " + flag
		}
	case errors.As(err, &invalid):
		why := err
		if inner := errors.Unwrap(invalid); inner != nil {
			why = inner
		}
		// A number, bool or duration that does not parse: say it as
		// package flag did, without strconv's "parsing …" or the value
		// again.
		var num *strconv.NumError
		switch {
		case errors.As(why, &num) && errors.Is(num.Err, strconv.ErrRange):
			why = errors.New("value out of range")
		case errors.As(why, &num), invalid.GetFlag().Value.Type() == "duration":
			why = errors.New("parse error")
		}
		msg = fmt.Sprintf("invalid %s %q: %v", dashed(invalid.GetFlag().Name), invalid.GetValue(), why)
	}
	return &usageError{cmd: name, msg: msg}
}

// dashed writes a flag as the shells show it: -o, --name.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}
