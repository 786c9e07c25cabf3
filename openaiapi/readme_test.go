package openaiapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/loomthreads/loom/agent/scripted"
	"github.com/loomthreads/loom/httpapi"
	"github.com/loomthreads/loom/openaiapi"
	"github.com/loomthreads/loom/thread"
)

// readmeBaseURL is the base URL the README's examples use.
const readmeBaseURL = `"http://127.0.0.1:8080/openai/v1"`

// readmeGo is the README's Go example, line for line, with its base URL a
// parameter: TestREADMEGoExample checks that the README says exactly this,
// and runs it.
func readmeGo(ctx context.Context, baseURL string, out io.Writer) {
	client := openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey("loom"))
	conv, _ := client.Conversations.New(ctx, conversations.ConversationNewParams{})
	resp, _ := client.Responses.New(ctx, responses.ResponseNewParams{Model: "loom", Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hello!")}})
	fmt.Fprintln(out, resp.OutputText())
}

// The Go example of the README's "Use loom from the OpenAI SDKs" is the body
// of readmeGo (but for its base URL and its writer), and it prints what the
// demo model says.
func TestREADMEGoExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Use loom from the OpenAI SDKs\n")
	if !ok {
		t.Fatal(`README has no "## Use loom from the OpenAI SDKs"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	m := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(section)
	if m == nil {
		t.Fatal("the README's OpenAI section has no Go example")
	}
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	body := string(src)
	for _, line := range strings.Split(strings.TrimSpace(m[1]), "\n") {
		want := strings.ReplaceAll(line, readmeBaseURL, "baseURL")
		want = strings.ReplaceAll(want, "fmt.Println(", "fmt.Fprintln(out, ")
		if !strings.Contains(body, "\t"+strings.TrimLeft(want, "\t")+"\n") {
			t.Errorf("README line %q is not in readmeGo", line)
		}
	}

	db := thread.New(thread.NewMemoryStore(), nil)
	api := httpapi.New(httpapi.Options{DB: db})
	mux := http.NewServeMux()
	mux.Handle(openaiapi.Prefix+"/", openaiapi.Errors(api.Protect(openaiapi.New(openaiapi.Options{DB: db, Chat: scripted.Echo()}))))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	var out strings.Builder
	readmeGo(t.Context(), srv.URL+openaiapi.Prefix, &out)
	if got := out.String(); got != "You said: Hello!\n" {
		t.Fatalf("the README's Go example printed %q", got)
	}
}
