package openaiapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/httpapi"
	"github.com/loomthreads/loom/openaiapi"
	"github.com/loomthreads/loom/thread"
)

// A response is a commit on a loom thread, answered by the server's model
// (here the demo model, scripted.Echo). Continuing the latest response
// goes on along its thread; continuing an earlier one branches there — a
// loom fork, which loom's page shows in the thread's family.
func Example_responses() {
	ctx := context.Background()
	db := thread.New(thread.NewMemoryStore(), nil)
	api := httpapi.New(httpapi.Options{DB: db}) // no keys: any key, on loopback
	mux := http.NewServeMux()
	mux.Handle(openaiapi.Prefix+"/", openaiapi.Errors(api.Protect(openaiapi.New(openaiapi.Options{DB: db, Chat: scripted.Echo()}))))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/openai/v1"), option.WithAPIKey("loom"))

	ask := func(previous, input string) *responses.Response {
		p := responses.ResponseNewParams{Model: "loom", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(input)}}
		if previous != "" {
			p.PreviousResponseID = openai.String(previous)
		}
		r, err := client.Responses.New(ctx, p)
		if err != nil {
			panic(err)
		}
		return r
	}
	first := ask("", "Hello")
	second := ask(first.ID, "And then?")
	branch := ask(first.ID, "Or else?") // from the first again: a branch
	fmt.Println(first.OutputText(), "/", second.OutputText(), "/", branch.OutputText())

	// A response id ends with its thread's id.
	threadOf := func(r *responses.Response) string {
		return r.ID[strings.Index(r.ID[len("resp_"):], "_")+len("resp_")+1:]
	}
	fmt.Println("second on the first's thread:", threadOf(second) == threadOf(first))
	fork, _ := db.Thread(ctx, threadOf(branch))
	fmt.Println("branch forked from it:", fork.Record().ForkedFrom.Thread == threadOf(first))
	msgs, _ := fork.Messages(ctx, thread.ReadOptions{})
	for _, m := range msgs {
		fmt.Printf("%s: %s\n", m.Role, m.Text())
	}
	// Output:
	// You said: Hello / You said: And then? / You said: Or else?
	// second on the first's thread: true
	// branch forked from it: true
	// user: Hello
	// assistant: You said: Hello
	// user: Or else?
	// assistant: You said: Or else?
}
