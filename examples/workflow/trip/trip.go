// Package trip is the workflow of examples/workflow as a package, so that
// a server can run it by name: plan, then two researchers fanned out, each
// an agent on its own sub-thread, then a writer fanned in on main who
// writes from both; and, registered as "trip-approval", a step after the
// writer that asks for approval and waits, durably, for it, then books.
//
// Its agents run on the scripted model (agent/scripted): no key, no
// network. `loom serve --example-workflows` registers both:
//
//	reg := workflow.NewRegistry()
//	if err := trip.Register(reg); err != nil { … }
package trip

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/workflow"
)

// The names Register registers.
const (
	Name         = "trip"
	ApprovalName = "trip-approval"
)

// Options tune the graph; nil means the defaults.
type Options struct {
	// Out gets a line as each step does its work; nil discards them.
	Out io.Writer
	// BeforeWrite is called in the writer's step once it has started (and
	// its start is committed), before it writes: the example kills its
	// process there.
	BeforeWrite func()
	// Approve adds the approval step after the writer, and the booking
	// after it.
	Approve bool
}

// Input is the workflow's input: where to go ("Lisbon" when empty).
type Input struct {
	City string `json:"city,omitzero"`
}

// Approval is the input the approval step asks for.
type Approval struct {
	Approved bool   `json:"approved"`
	Note     string `json:"note,omitzero"`
}

// Register registers the trip (Name) and the trip that waits for approval
// (ApprovalName) in r.
func Register(r *workflow.Registry) error {
	if err := r.Register(Name, Graph(nil), &workflow.RegisterOptions{Title: "a weekend away",
		Description: "plans a weekend: two researchers fanned out on their own sub-threads, a writer fanned in; input {\"city\": …}",
		SubThreads:  []string{"hotels", "food"}, CheckInput: CheckInput}); err != nil {
		return err
	}
	return r.Register(ApprovalName, Graph(&Options{Approve: true}), &workflow.RegisterOptions{Title: "a weekend away, approved",
		Description: "the trip, then a step that waits for approval (input {\"approved\": true|false}) before booking",
		SubThreads:  []string{"hotels", "food"}, CheckInput: CheckInput})
}

// CheckInput accepts no input (null), or an Input object.
func CheckInput(in json.RawMessage) error {
	if len(in) == 0 || string(in) == "null" {
		return nil
	}
	var v Input
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("want {\"city\": \"…\"}: %v", err)
	}
	return nil
}

// researcher is a step that runs an agent on its own sub-thread.
func researcher(out io.Writer, key, topic, finding string) workflow.StepFunc {
	return func(ctx context.Context, s *workflow.Step) (any, error) {
		th, err := s.SubThread(ctx, key)
		if err != nil {
			return nil, err
		}
		city, err := cityOf(s)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "%s researches %s (attempt %d)\n", key, topic, s.Attempt())
		a := agent.New(scripted.New(scripted.Text(finding)), &agent.Options{Instructions: "You research " + topic + "."})
		res, err := a.Run(ctx, th, message.User("What should a visitor to "+city+" know about "+topic+"?"))
		if err != nil {
			return nil, err
		}
		return res.Text(), nil
	}
}

// cityOf returns the city the plan chose, from a researcher's input.
func cityOf(s *workflow.Step) (string, error) {
	var in map[string]string
	if err := s.DecodeInput(&in); err != nil {
		return "", err
	}
	return in["plan"], nil
}

// Graph returns the trip's graph.
func Graph(opts *Options) *workflow.Graph {
	var o Options
	if opts != nil {
		o = *opts
	}
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	write := "write"
	g := workflow.NewGraph().
		Add("plan", func(ctx context.Context, s *workflow.Step) (any, error) {
			var in Input
			if len(s.Input()) > 0 && string(s.Input()) != "null" {
				if err := json.Unmarshal(s.Input(), &in); err != nil {
					return nil, fmt.Errorf("input %s: want {\"city\": …}", s.Input())
				}
			}
			if in.City == "" {
				in.City = "Lisbon"
			}
			main, err := s.SubThread(ctx, workflow.MainKey)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(out, "plan: a weekend in %s\n", in.City)
			_, err = main.Append(ctx, message.User("Plan a weekend in "+in.City+"."))
			return in.City, err
		}, "hotels", "food").
		Add("hotels", researcher(out, "hotels", "hotels", "Stay in Alfama: small hotels, views over the river."), write).
		Add("food", researcher(out, "food", "food", "Eat pastéis de nata in Belém, grilled sardines in June."), write)
	var next []string
	if o.Approve {
		next = []string{"approve"}
	}
	g.Add(write, func(ctx context.Context, s *workflow.Step) (any, error) {
		var found map[string]string
		if err := s.DecodeInput(&found); err != nil {
			return nil, err
		}
		main, err := s.SubThread(ctx, workflow.MainKey)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "writer writes from %d findings (attempt %d)\n", len(found), s.Attempt())
		if o.BeforeWrite != nil {
			o.BeforeWrite()
		}
		a := agent.New(scripted.New(scripted.Text("Your weekend: "+found["hotels"]+" "+found["food"])), nil)
		res, err := a.Run(ctx, main, message.User("Write the plan from the findings."))
		if err != nil {
			return nil, err
		}
		return res.Text(), nil
	}, next...)
	if o.Approve {
		g.Add("approve", func(ctx context.Context, s *workflow.Step) (any, error) {
			raw, err := s.Ask(map[string]string{"question": "book this weekend?", "answer": `{"approved": true|false, "note": "…"}`})
			if err != nil {
				return nil, err
			}
			var a Approval
			if err := json.Unmarshal(raw, &a); err != nil {
				return nil, fmt.Errorf("approval %s: want {\"approved\": true|false}", raw)
			}
			fmt.Fprintf(out, "approval: %v\n", a.Approved)
			if !a.Approved {
				return a, s.Goto()
			}
			return a, nil
		}, "book").
			Add("book", func(ctx context.Context, s *workflow.Step) (any, error) {
				main, err := s.SubThread(ctx, workflow.MainKey)
				if err != nil {
					return nil, err
				}
				fmt.Fprintln(out, "booked")
				_, err = main.Append(ctx, message.New(message.RoleAssistant, message.Text{Text: "Booked."}))
				return "booked", err
			})
	}
	return g
}
