package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/loomthreads/loom/thread"
)

// labelsFlag collects repeated --label k=v flags: a pflag.Value.
type labelsFlag map[string]string

func (l *labelsFlag) String() string {
	if l == nil {
		return ""
	}
	return formatLabels(*l)
}

func (l *labelsFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return errors.New("a label is key=value")
	}
	if *l == nil {
		*l = labelsFlag{}
	}
	(*l)[k] = v
	return nil
}

// Type implements pflag.Value: the value's name in help when its usage
// names none.
func (l *labelsFlag) Type() string { return "k=v" }

// kindFlag is a thread kind, checked when set.
type kindFlag thread.Kind

func (k *kindFlag) String() string { return string(*k) }

// Type implements pflag.Value.
func (k *kindFlag) Type() string { return "kind" }

func (k *kindFlag) Set(s string) error {
	switch thread.Kind(s) {
	case thread.KindUndetermined, thread.KindLocal, thread.KindService, thread.KindWorkflow:
		*k = kindFlag(s)
		return nil
	}
	return errors.New("a kind is undetermined, local, service or workflow")
}

// strategiesFlag collects repeated --strategy flags, parsed when set.
type strategiesFlag struct {
	names      []string
	strategies []thread.Strategy
}

func (s *strategiesFlag) String() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.names, ",")
}

func (s *strategiesFlag) Set(v string) error {
	st, err := parseStrategy(v)
	if err != nil {
		return err
	}
	s.names = append(s.names, v)
	s.strategies = append(s.strategies, st)
	return nil
}

// Type implements pflag.Value.
func (s *strategiesFlag) Type() string { return "strategy" }

// parseStrategy reads drop_oldest, sliding_window:N or elide_tool_results:N.
func parseStrategy(v string) (thread.Strategy, error) {
	name, arg, hasArg := strings.Cut(v, ":")
	n := 0
	if hasArg {
		var err error
		if n, err = strconv.Atoi(arg); err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a count", arg)
		}
	}
	switch name {
	case "drop_oldest":
		if hasArg {
			return nil, fmt.Errorf("strategy drop_oldest takes no count")
		}
		return thread.DropOldest{}, nil
	case "sliding_window":
		if n < 1 {
			return nil, fmt.Errorf("strategy sliding_window:N needs N of 1 or more turns")
		}
		return thread.SlidingWindow{Turns: n}, nil
	case "elide_tool_results":
		return thread.ElideToolResults{KeepLast: n}, nil
	}
	return nil, errors.New("unknown strategy (drop_oldest, sliding_window:N, elide_tool_results:N)")
}
