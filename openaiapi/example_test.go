package openaiapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/loomthreads/loom/httpapi"
	"github.com/loomthreads/loom/openaiapi"
	"github.com/loomthreads/loom/thread"
)

// An OpenAI SDK keeps its conversation in loom by its base URL: the
// conversation is a loom thread, its items the thread's messages.
func Example() {
	ctx := context.Background()
	db := thread.New(thread.NewMemoryStore(), nil)
	api := httpapi.New(httpapi.Options{DB: db}) // no keys: any key, on loopback
	mux := http.NewServeMux()
	mux.Handle(openaiapi.Prefix+"/", openaiapi.Errors(api.Protect(openaiapi.New(openaiapi.Options{DB: db}))))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	client := openai.NewClient(option.WithBaseURL(srv.URL+"/openai/v1"), option.WithAPIKey("loom"))
	conv, err := client.Conversations.New(ctx, conversations.ConversationNewParams{
		Items: []responses.ResponseInputItemUnionParam{
			responses.ResponseInputItemParamOfMessage("What is a loom?", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfMessage("A frame for weaving threads.", responses.EasyInputMessageRoleAssistant),
		},
		Metadata: shared.Metadata{"topic": "weaving"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	th, err := db.Thread(ctx, conv.ID)
	if err != nil {
		fmt.Println(err)
		return
	}
	msgs, err := th.Messages(ctx, thread.ReadOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	state, _ := th.State(ctx, 0)
	fmt.Printf("thread %q, labels %v\n", th.Title(), th.Record().Labels)
	for _, m := range msgs {
		fmt.Printf("%s: %s\n", m.Role, m.Text())
	}
	fmt.Println("metadata:", string(state[openaiapi.MetadataState]))
	// Output:
	// thread "What is a loom?", labels map[openai:conversation]
	// user: What is a loom?
	// assistant: A frame for weaving threads.
	// metadata: {"topic":"weaving"}
}
