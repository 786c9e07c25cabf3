package openaiapi_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
)

// BenchmarkItems compares the OpenAI-compatible surface with loom's own
// API on one server on SQLite: creating one item (appending one message)
// and listing 20 (reading the last 20 messages). native is loom's API
// driven by plain net/http; openai-http is /openai/v1 driven the same way
// (the server's own overhead); openai-go is /openai/v1 through the SDK,
// whose decoding of its typed answers is part of what a caller pays.
// docs/benchmarks.md reports the figures; the compatible surface's target
// is at most 20% over the native one.
//
//	go test -run '^$' -bench . -benchtime 2000x ./openaiapi/
func BenchmarkItems(b *testing.B) {
	e := newEnv(b, sqliteDB(b))
	ctx := b.Context()
	conv, err := e.a.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		b.Fatal(err)
	}
	// A conversation with history to list from.
	var seed []responses.ResponseInputItemUnionParam
	for i := range 100 {
		seed = append(seed, userItem(fmt.Sprintf("message %d of the history, of a usual length for a chat turn", i)))
	}
	if _, err := e.a.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: seed}); err != nil {
		b.Fatal(err)
	}
	native := e.url + "/v1/threads/" + conv.ID + "/messages"
	hc := &http.Client{}
	do := func(b *testing.B, method, url string, body []byte, want int) {
		req, _ := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+keyA)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			b.Fatalf("%s %s: %s", method, url, resp.Status)
		}
	}
	text := "a new message of a usual length for a chat turn, neither short nor long"

	b.Run("create/native", func(b *testing.B) {
		body := []byte(`{"messages":[{"role":"user","contents":[{"type":"text","text":"` + text + `"}]}]}`)
		for b.Loop() {
			do(b, "POST", native, body, http.StatusCreated)
		}
	})
	b.Run("create/openai-http", func(b *testing.B) {
		body := []byte(`{"items":[{"role":"user","content":"` + text + `"}]}`)
		for b.Loop() {
			do(b, "POST", e.url+"/openai/v1/conversations/"+conv.ID+"/items", body, http.StatusOK)
		}
	})
	b.Run("create/openai-go", func(b *testing.B) {
		params := conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{userItem(text)}}
		for b.Loop() {
			if _, err := e.a.Conversations.Items.New(ctx, conv.ID, params); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("list20/native", func(b *testing.B) {
		for b.Loop() {
			do(b, "GET", native+"?limit=20", nil, http.StatusOK)
		}
	})
	b.Run("list20/openai-http", func(b *testing.B) {
		for b.Loop() {
			do(b, "GET", e.url+"/openai/v1/conversations/"+conv.ID+"/items?limit=20", nil, http.StatusOK)
		}
	})
	b.Run("list20/openai-go", func(b *testing.B) {
		params := conversations.ItemListParams{Limit: param.NewOpt[int64](20)}
		for b.Loop() {
			page, err := e.a.Conversations.Items.List(ctx, conv.ID, params)
			if err != nil || len(page.Data) != 20 {
				b.Fatal(err)
			}
		}
	})
}
