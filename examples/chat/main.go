// Chat is an agent with a tool that keeps its thread in SQLite: kill it in
// the middle of a run and the next start carries on from the last step it
// committed.
//
// With no key it runs on a scripted model (agent/scripted) that calls the
// weather tool and then answers from its result:
//
//	go run ./examples/chat -say "Weather in Lisbon?" -crash   # killed (SIGKILL) right after the tool ran
//	go run ./examples/chat                                    # resumes: answers from the stored result
//	go run ./examples/chat -say "And in Oslo?"                # the conversation goes on
//
// Pointed at a real provider by the environment:
//
//	LOOM_PROVIDER=openai    OPENAI_API_KEY=…    [OPENAI_MODEL=gpt-4o-mini]          go run ./examples/chat -say …
//	LOOM_PROVIDER=responses OPENAI_API_KEY=…    (a service-managed thread)            go run ./examples/chat -say …
//	LOOM_PROVIDER=anthropic ANTHROPIC_API_KEY=… [ANTHROPIC_MODEL=claude-sonnet-4-5] go run ./examples/chat -say …
//	LOOM_PROVIDER=openai OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=llama3.2  (Ollama, vLLM…)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/anthropic"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/openai"
	"github.com/loomthreads/loom/thread"

	_ "github.com/loomthreads/loom/jsonfile"
	_ "github.com/loomthreads/loom/postgres"
	_ "github.com/loomthreads/loom/redis"
	_ "github.com/loomthreads/loom/sqlite"
)

func main() {
	store := flag.String("store", "sqlite://./chat.db", "store URL")
	id := flag.String("thread", "chat-demo", "thread id")
	say := flag.String("say", "", "what the user says; empty resumes the thread")
	crash := flag.Bool("crash", false, "kill this process (SIGKILL) right after the first tool step is committed")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := run(ctx, os.Stdout, options{store: *store, thread: *id, say: *say, crash: *crash, provider: os.Getenv("LOOM_PROVIDER")})
	if err != nil {
		fmt.Fprintln(os.Stderr, "chat:", err)
		os.Exit(1)
	}
}

type options struct {
	store, thread, say, provider string
	crash                        bool
}

type weatherIn struct {
	City string `json:"city" jsonschema:"the city, such as Lisbon"`
}

// weather is a stand-in for a real weather service: the same city always
// gets the same weather.
func weather(_ context.Context, in weatherIn) (map[string]any, error) {
	if strings.TrimSpace(in.City) == "" {
		return nil, errors.New("which city?")
	}
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(in.City)))
	sky := []string{"sunny", "cloudy", "rainy", "windy"}[h.Sum32()%4]
	return map[string]any{"city": in.City, "temp_c": 5 + int(h.Sum32()%25), "sky": sky}, nil
}

func run(ctx context.Context, out io.Writer, o options) error {
	db, err := thread.Open(ctx, o.store, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	client, err := newClient(o.provider)
	if err != nil {
		return err
	}
	a := agent.New(client, &agent.Options{
		Name:         "weather-bot",
		Instructions: "You answer questions about the weather. Use the weather tool; answer in one sentence.",
		Tools:        []agent.Tool{agent.MustFunc("weather", "Current weather of a city.", weather)},
		View:         thread.ViewOptions{Budget: 16000},
	})
	th, err := db.Thread(ctx, o.thread)
	if errors.Is(err, thread.ErrNotFound) {
		th, err = a.NewThread(ctx, db, thread.CreateOptions{ID: o.thread, Title: "Weather chat"})
	}
	if err != nil {
		return err
	}
	var input []message.Message
	if o.say != "" {
		input = append(input, message.User(o.say))
	} else if n, err := th.Len(ctx); err != nil {
		return err
	} else if n == 0 {
		return errors.New("the thread is empty: say something with -say")
	} else {
		fmt.Fprintf(out, "resuming %s at version %d\n", th.ID(), th.Version())
	}
	for ev, err := range a.RunStream(ctx, th, input...) {
		if err != nil {
			return err
		}
		switch {
		case ev.Update != nil:
			fmt.Fprint(out, ev.Update.Text)
		case ev.Step != nil:
			for _, m := range ev.Step.Messages {
				for _, c := range m.Calls() {
					fmt.Fprintf(out, "→ %s(%s)\n", c.Name, c.Arguments)
				}
				for _, r := range m.Results() {
					fmt.Fprintf(out, "← %s\n", r.Result)
				}
			}
			if ev.Step.Kind == agent.StepTools && o.crash {
				fmt.Fprintln(out, "crashing now (the tool step is committed)")
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		case ev.Result != nil:
			fmt.Fprintf(out, "\n[%s thread %s, version %d]\n", th.Kind(), th.ID(), ev.Result.Version)
		}
	}
	return nil
}

func newClient(provider string) (agent.ChatClient, error) {
	switch provider {
	case "", "scripted":
		c := scripted.New(scripted.Step{Func: fakeModel})
		c.Repeat, c.Record = true, false
		return c, nil
	case "openai":
		return openai.NewChat(openai.Options{Model: env("OPENAI_MODEL", "gpt-4o-mini")}), nil
	case "responses":
		return openai.NewResponses(openai.ResponsesOptions{Options: openai.Options{Model: env("OPENAI_MODEL", "gpt-4o-mini")}}), nil
	case "anthropic":
		return anthropic.New(anthropic.Options{Model: env("ANTHROPIC_MODEL", "claude-sonnet-4-5")}), nil
	}
	return nil, fmt.Errorf("LOOM_PROVIDER %q: want scripted, openai, responses or anthropic", provider)
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// fakeModel stands in for a model: asked about a city, it calls the weather
// tool; given the tool's result, it answers from it.
func fakeModel(_ context.Context, r scripted.Request) (*agent.ChatResponse, error) {
	if len(r.Messages) == 0 {
		return nil, errors.New("nothing to answer")
	}
	last := r.Messages[len(r.Messages)-1]
	if res := last.Results(); len(res) > 0 {
		text := "The weather service said: " + res[0].Result
		if res[0].IsError {
			text = "I could not get the weather: " + res[0].Result
		}
		return &agent.ChatResponse{Messages: []message.Message{message.Assistant(text)}, FinishReason: agent.FinishStop}, nil
	}
	city := lastWord(last.Text())
	call := message.FunctionCall{CallID: "call_" + message.NewID(), Name: "weather", Arguments: fmt.Sprintf(`{"city":%q}`, city)}
	return &agent.ChatResponse{Messages: []message.Message{message.New(message.RoleAssistant, call)}, FinishReason: agent.FinishToolCalls}, nil
}

func lastWord(s string) string {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '?' || r == '!' || r == '.' || r == ',' })
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}
