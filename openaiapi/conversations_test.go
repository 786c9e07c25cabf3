package openaiapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/loomthreads/loom/httpapi"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/openaiapi"
	"github.com/loomthreads/loom/thread"
)

func userItem(text string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser)
}

func assistantItem(text string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleAssistant)
}

func callItem(callID, name, args string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemParamOfFunctionCall(args, callID, name)
}

func outputItem(callID, output string) responses.ResponseInputItemUnionParam {
	it := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	it.OfFunctionCallOutput.CallID = param.NewOpt(callID)
	return it
}

// brief is an item in a word: "user:hi", "function_call:add({})",
// "function_call_output:3", or its type.
func brief(tb testing.TB, raw string) string {
	tb.Helper()
	var it struct {
		Type      string `json:"type"`
		Role      string `json:"role"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Output    any    `json:"output"`
		Content   []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal([]byte(raw), &it); err != nil {
		tb.Fatalf("item %s: %v", raw, err)
	}
	switch it.Type {
	case "message":
		var texts []string
		for _, c := range it.Content {
			texts = append(texts, c.Text)
		}
		return it.Role + ":" + strings.Join(texts, "+")
	case "function_call":
		return "function_call:" + it.Name + "(" + it.Arguments + ")"
	case "function_call_output":
		return fmt.Sprint("function_call_output:", it.Output)
	}
	return it.Type
}

func briefs(tb testing.TB, items []conversations.ConversationItemUnion) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = brief(tb, it.RawJSON())
	}
	return out
}

// apiError returns err as openai-go's error, failing the test if it is not.
func apiError(tb testing.TB, err error, status int) *openai.Error {
	tb.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		tb.Fatalf("error %v, want an *openai.Error", err)
	}
	if e.StatusCode != status {
		tb.Fatalf("status %d (%s), want %d", e.StatusCode, e.RawJSON(), status)
	}
	return e
}

// TestConversationLifecycle drives every conversation and item call
// through openai-go.
func TestConversationLifecycle(t *testing.T) {
	onStores(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		conv, err := e.a.Conversations.New(ctx, conversations.ConversationNewParams{
			Items:    []responses.ResponseInputItemUnionParam{userItem("What is 1+2?\nPlease."), callItem("call_1", "add", `{"a":1,"b":2}`), outputItem("call_1", "3")},
			Metadata: shared.Metadata{"topic": "sums"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(conv.ID, "conv_") || len(conv.ID) != len("conv_")+26 || conv.Object != "conversation" || conv.CreatedAt == 0 {
			t.Errorf("created %+v", conv)
		}
		if md, _ := conv.Metadata.(map[string]any); md["topic"] != "sums" {
			t.Errorf("metadata %#v", conv.Metadata)
		}
		// It is a loom thread, labeled, titled from the user's text.
		th, err := e.tenantA.Thread(ctx, conv.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rec := th.Record(); rec.Title != "What is 1+2? Please." || rec.Labels["openai"] != "conversation" || rec.CreatedAt.Unix() != conv.CreatedAt || rec.Kind != thread.KindLocal {
			t.Errorf("thread %+v", rec)
		}

		got, err := e.a.Conversations.Get(ctx, conv.ID)
		if err != nil || got.ID != conv.ID || got.CreatedAt != conv.CreatedAt {
			t.Fatalf("get: %+v %v", got, err)
		}
		upd, err := e.a.Conversations.Update(ctx, conv.ID, conversations.ConversationUpdateParams{Metadata: shared.Metadata{"topic": "arithmetic", "n": "2"}})
		if err != nil {
			t.Fatal(err)
		}
		got, err = e.a.Conversations.Get(ctx, conv.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]any{"topic": "arithmetic", "n": "2"}, got.Metadata); diff != "" || !cmp.Equal(upd.Metadata, got.Metadata) {
			t.Errorf("metadata after update (-want +got):\n%s", diff)
		}

		added, err := e.a.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{
			Items:   []responses.ResponseInputItemUnionParam{assistantItem("It is 3."), userItem("Thanks")},
			Include: []responses.ResponseIncludable{responses.ResponseIncludableMessageOutputTextLogprobs},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(added.Data) != 2 || added.FirstID != added.Data[0].ID || added.LastID != added.Data[1].ID || added.HasMore || added.Object != "list" {
			t.Errorf("items created: %s", added.RawJSON())
		}
		if !strings.HasPrefix(added.Data[0].ID, "msg_") || added.Data[0].Status != "completed" {
			t.Errorf("created item %s", added.Data[0].RawJSON())
		}

		page, err := e.a.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"user:What is 1+2?\nPlease.", `function_call:add({"a":1,"b":2})`, "function_call_output:3", "assistant:It is 3.", "user:Thanks"}
		if diff := cmp.Diff(want, briefs(t, page.Data)); diff != "" {
			t.Errorf("items (-want +got):\n%s", diff)
		}
		if !strings.HasPrefix(page.Data[1].ID, "fc_") || !strings.HasPrefix(page.Data[2].ID, "fco_") || page.Data[1].CallID != "call_1" {
			t.Errorf("function items %s %s", page.Data[1].RawJSON(), page.Data[2].RawJSON())
		}

		item, err := e.a.Conversations.Items.Get(ctx, conv.ID, page.Data[1].ID, conversations.ItemGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if item.ID != page.Data[1].ID || item.Type != "function_call" || item.Name != "add" {
			t.Errorf("item %s", item.RawJSON())
		}

		after, err := e.a.Conversations.Items.Delete(ctx, conv.ID, page.Data[3].ID)
		if err != nil {
			t.Fatal(err)
		}
		if after.ID != conv.ID || after.Object != "conversation" {
			t.Errorf("delete item answered %s", after.RawJSON())
		}
		page, err = e.a.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"user:Thanks", "function_call_output:3", `function_call:add({"a":1,"b":2})`, "user:What is 1+2?\nPlease."}, briefs(t, page.Data)); diff != "" {
			t.Errorf("items after the delete, newest first (-want +got):\n%s", diff)
		}
		// The metadata is the head's still.
		got, err = e.a.Conversations.Get(ctx, conv.ID)
		if err != nil || got.Metadata.(map[string]any)["topic"] != "arithmetic" {
			t.Errorf("after the delete: %+v %v", got, err)
		}

		del, err := e.a.Conversations.Delete(ctx, conv.ID)
		if err != nil || !del.Deleted || del.ID != conv.ID || del.Object != "conversation.deleted" {
			t.Fatalf("delete: %+v %v", del, err)
		}
		_, err = e.a.Conversations.Get(ctx, conv.ID)
		if e := apiError(t, err, http.StatusNotFound); e.Message != fmt.Sprintf("Conversation with id '%s' not found.", conv.ID) || e.Type != "invalid_request_error" {
			t.Errorf("after delete: %s", e.RawJSON())
		}
	})
}

// TestEmptyConversation: {} makes a conversation with {} metadata, whose
// first user item gives its title.
func TestEmptyConversation(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	conv, err := e.a.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(conv.RawJSON(), `"metadata":{}`) {
		t.Errorf("created %s", conv.RawJSON())
	}
	page, err := e.a.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{})
	if err != nil || len(page.Data) != 0 || page.HasMore {
		t.Fatalf("list of an empty conversation: %v %v", page, err)
	}
	if _, err := e.a.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{
		assistantItem("Hello!"), userItem("Tell me about " + strings.Repeat("looms ", 30)),
	}}); err != nil {
		t.Fatal(err)
	}
	th, err := e.tenantA.Thread(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if title := th.Title(); !strings.HasPrefix(title, "Tell me about looms looms") || len([]rune(title)) != 80 || !strings.HasSuffix(title, "…") {
		t.Errorf("title %q", title)
	}
}

// TestPagination pages through 250 items with the SDK's auto-pager, both
// orders, from the start and after a cursor.
func TestPagination(t *testing.T) {
	onStores(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		conv, err := e.a.Conversations.New(ctx, conversations.ConversationNewParams{})
		if err != nil {
			t.Fatal(err)
		}
		var want []string // oldest first
		for batch := range 5 {
			var items []responses.ResponseInputItemUnionParam
			for i := range 50 {
				text := fmt.Sprintf("item %03d", batch*50+i)
				items = append(items, userItem(text))
				want = append(want, "user:"+text)
			}
			if _, err := e.a.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: items}); err != nil {
				t.Fatal(err)
			}
		}
		collect := func(params conversations.ItemListParams) (briefs, ids []string) {
			t.Helper()
			pager := e.a.Conversations.Items.ListAutoPaging(ctx, conv.ID, params)
			for pager.Next() {
				it := pager.Current()
				briefs = append(briefs, brief(t, it.RawJSON()))
				ids = append(ids, it.ID)
			}
			if err := pager.Err(); err != nil {
				t.Fatal(err)
			}
			return briefs, ids
		}
		reversed := func(s []string) []string {
			out := make([]string, len(s))
			for i, v := range s {
				out[len(s)-1-i] = v
			}
			return out
		}
		asc, ascIDs := collect(conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc, Limit: param.NewOpt[int64](30)})
		if diff := cmp.Diff(want, asc); diff != "" {
			t.Errorf("asc (-want +got):\n%s", diff)
		}
		desc, descIDs := collect(conversations.ItemListParams{Limit: param.NewOpt[int64](7)})
		if diff := cmp.Diff(reversed(want), desc); diff != "" {
			t.Errorf("desc (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(reversed(ascIDs), descIDs); diff != "" {
			t.Errorf("ids desc vs asc (-want +got):\n%s", diff)
		}
		def, _ := collect(conversations.ItemListParams{}) // limit 20, desc
		if len(def) != 250 {
			t.Errorf("default paging read %d items", len(def))
		}
		// After the 100th item (oldest first): 150 items either way.
		after := ascIDs[99]
		ascAfter, _ := collect(conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc, After: param.NewOpt(after), Limit: param.NewOpt[int64](100)})
		if diff := cmp.Diff(want[100:], ascAfter); diff != "" {
			t.Errorf("asc after (-want +got):\n%s", diff)
		}
		descAfter, _ := collect(conversations.ItemListParams{After: param.NewOpt(after), Limit: param.NewOpt[int64](100)})
		if diff := cmp.Diff(reversed(want[:99]), descAfter); diff != "" {
			t.Errorf("desc after (-want +got):\n%s", diff)
		}
		// One page: has_more, first_id and last_id.
		page, err := e.a.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Limit: param.NewOpt[int64](100)})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) != 100 || !page.HasMore || page.LastID != page.Data[99].ID || !strings.Contains(page.RawJSON(), `"first_id":"`+descIDs[0]+`"`) {
			t.Errorf("page: %d items, has_more %v, last_id %s", len(page.Data), page.HasMore, page.LastID)
		}
		last, err := e.a.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{After: param.NewOpt(descIDs[199]), Limit: param.NewOpt[int64](50)})
		if err != nil || len(last.Data) != 50 || last.HasMore {
			t.Errorf("the last page: %d items, has_more %v, %v", len(last.Data), last.HasMore, err)
		}
	})
}

// TestDeleteItemKeepsHistory: a deleted item is gone from the head and in
// the version before, read through package thread and loom's own API.
func TestDeleteItemKeepsHistory(t *testing.T) {
	onStores(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		conv, err := e.a.Conversations.New(ctx, conversations.ConversationNewParams{
			Items:    []responses.ResponseInputItemUnionParam{userItem("a"), assistantItem("b")},
			Metadata: shared.Metadata{"k": "v"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.a.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{userItem("c")}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.a.Conversations.Update(ctx, conv.ID, conversations.ConversationUpdateParams{Metadata: shared.Metadata{"k": "w"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.a.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{userItem("d")}}); err != nil {
			t.Fatal(err)
		}
		th, err := e.tenantA.Thread(ctx, conv.ID)
		if err != nil {
			t.Fatal(err)
		}
		before := th.Version()
		msgs, err := th.Messages(ctx, thread.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Delete "b", which the first commit holds.
		if _, err := e.a.Conversations.Items.Delete(ctx, conv.ID, msgs[1].ID); err != nil {
			t.Fatal(err)
		}
		if err := th.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if th.Version() != before+1 {
			t.Errorf("version %d after the delete, want %d", th.Version(), before+1)
		}
		now, err := th.Messages(ctx, thread.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		then, err := th.Messages(ctx, thread.ReadOptions{Version: before})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"a", "c", "d"}, texts(now)); diff != "" {
			t.Errorf("head (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"a", "b", "c", "d"}, texts(then)); diff != "" {
			t.Errorf("previous version (-want +got):\n%s", diff)
		}
		if now[0].ID != msgs[0].ID || now[1].ID != msgs[2].ID || now[2].ID != msgs[3].ID {
			t.Error("the messages kept lost their ids")
		}
		st, err := th.State(ctx, 0)
		if err != nil || string(st[openaiapi.MetadataState]) != `{"k":"w"}` {
			t.Errorf("state after the delete: %s %v", st[openaiapi.MetadataState], err)
		}
		// loom's own API reads the old version too.
		var native struct {
			Messages []message.Message `json:"messages"`
		}
		getJSON(t, fmt.Sprintf("%s/v1/threads/%s/messages?version=%d", e.url, conv.ID, before), keyA, &native)
		if diff := cmp.Diff([]string{"a", "b", "c", "d"}, texts(native.Messages)); diff != "" {
			t.Errorf("native read of version %d (-want +got):\n%s", before, diff)
		}
		// The deleted item is not found any more; deleting it again is 404.
		_, err = e.a.Conversations.Items.Get(ctx, conv.ID, msgs[1].ID, conversations.ItemGetParams{})
		apiError(t, err, http.StatusNotFound)
		_, err = e.a.Conversations.Items.Delete(ctx, conv.ID, msgs[1].ID)
		apiError(t, err, http.StatusNotFound)
		// Deleting every item leaves an empty conversation.
		for _, m := range now {
			if _, err := e.a.Conversations.Items.Delete(ctx, conv.ID, m.ID); err != nil {
				t.Fatal(err)
			}
		}
		page, err := e.a.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{})
		if err != nil || len(page.Data) != 0 {
			t.Errorf("after deleting all: %v %v", page.Data, err)
		}
	})
}

func texts(msgs []message.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Text()
	}
	return out
}

// getJSON GETs url with key into v.
func getJSON(tb testing.TB, url, key string, v any) {
	tb.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		tb.Fatal(err)
	}
}

// TestLoomThreadAsConversation: a thread loom made (its agent's messages,
// several items per message) reads as a conversation, a sub-item can be
// deleted, and a loom fork is a conversation at once.
func TestLoomThreadAsConversation(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	th, err := e.tenantA.Create(ctx, thread.CreateOptions{ID: "th_agent", Messages: []message.Message{
		{ID: "m_user", Role: message.RoleUser, Contents: []message.Content{message.Text{Text: "add and sub"}}},
		{ID: "m_asst", Role: message.RoleAssistant, Contents: []message.Content{
			message.Text{Text: "calling"}, message.FunctionCall{CallID: "c1", Name: "add", Arguments: "{}"},
			message.FunctionCall{CallID: "c2", Name: "sub", Arguments: "{}"}, message.Usage{TotalTokens: 5}}},
		{ID: "m_tool", Role: message.RoleTool, Contents: []message.Content{
			message.FunctionResult{CallID: "c1", Result: "1"}, message.FunctionResult{CallID: "c2", Result: "2"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	page, err := e.a.Conversations.Items.List(ctx, th.ID(), conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc})
	if err != nil {
		t.Fatal(err)
	}
	var gotIDs []string
	for _, it := range page.Data {
		gotIDs = append(gotIDs, it.ID)
	}
	if diff := cmp.Diff([]string{"m_user", "m_asst", "m_asst.1", "m_asst.2", "m_tool", "m_tool.1"}, gotIDs); diff != "" {
		t.Errorf("item ids (-want +got):\n%s", diff)
	}
	// Paging forward from a sub-item, and back.
	fwd, err := e.a.Conversations.Items.List(ctx, th.ID(), conversations.ItemListParams{After: param.NewOpt("m_asst.1"), Order: "asc", Limit: param.NewOpt[int64](2)})
	if err != nil || len(fwd.Data) != 2 || fwd.Data[0].ID != "m_asst.2" || fwd.Data[1].ID != "m_tool" || !fwd.HasMore {
		t.Fatalf("asc after m_asst.1: %s %v", fwd.RawJSON(), err)
	}
	_, err = e.a.Conversations.Items.List(ctx, th.ID(), conversations.ItemListParams{After: param.NewOpt("m_asst.3"), Order: "asc"})
	apiError(t, err, http.StatusNotFound)
	back, err := e.a.Conversations.Items.List(ctx, th.ID(), conversations.ItemListParams{After: param.NewOpt("m_tool"), Limit: param.NewOpt[int64](2)})
	if err != nil || len(back.Data) != 2 || back.Data[0].ID != "m_asst.2" || back.Data[1].ID != "m_asst.1" || !back.HasMore {
		t.Fatalf("after m_tool: %s %v", back.RawJSON(), err)
	}
	back, err = e.a.Conversations.Items.List(ctx, th.ID(), conversations.ItemListParams{After: param.NewOpt(back.LastID)})
	if err != nil || len(back.Data) != 2 || back.Data[0].ID != "m_asst" || back.Data[1].ID != "m_user" || back.HasMore {
		t.Fatalf("after m_asst.1: %s %v", back.RawJSON(), err)
	}
	item, err := e.a.Conversations.Items.Get(ctx, th.ID(), "m_tool.1", conversations.ItemGetParams{})
	if err != nil || item.Output.OfString != "2" || item.CallID != "c2" {
		t.Fatalf("m_tool.1: %v %v", item, err)
	}
	// A client's item may not take a sub-item's id.
	err = e.a.Execute(ctx, "POST", "conversations/"+th.ID()+"/items", map[string]any{"items": []any{map[string]any{"id": "m_tool.1", "role": "user", "content": "x"}}}, nil)
	if ae := apiError(t, err, http.StatusConflict); ae.Param != "items[0].id" || ae.Response.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("a sub-item's id taken: %s", ae.RawJSON())
	}
	// Deleting the call to add cuts it from its message; the other items
	// keep their ids, and the deleted id names nothing.
	if _, err := e.a.Conversations.Items.Delete(ctx, th.ID(), "m_asst.1"); err != nil {
		t.Fatal(err)
	}
	msgs, err := e.tenantA.Thread(ctx, th.ID())
	if err != nil {
		t.Fatal(err)
	}
	now, err := msgs.Messages(ctx, thread.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var nowIDs []string
	for _, m := range now {
		nowIDs = append(nowIDs, m.ID)
	}
	if diff := cmp.Diff([]string{"m_user", "m_asst", "m_asst.2", "m_tool"}, nowIDs); diff != "" || now[1].Text() != "calling" || len(now[1].Calls()) != 0 || now[2].Calls()[0].Name != "sub" {
		t.Errorf("messages after deleting m_asst.1 (-want +got):\n%s", diff)
	}
	page, err = e.a.Conversations.Items.List(ctx, th.ID(), conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc})
	if err != nil {
		t.Fatal(err)
	}
	gotIDs = nil
	for _, it := range page.Data {
		gotIDs = append(gotIDs, it.ID)
	}
	if diff := cmp.Diff([]string{"m_user", "m_asst", "m_asst.2", "m_tool", "m_tool.1"}, gotIDs); diff != "" {
		t.Errorf("item ids after deleting m_asst.1 (-want +got):\n%s", diff)
	}
	if item, err := e.a.Conversations.Items.Get(ctx, th.ID(), "m_asst.2", conversations.ItemGetParams{}); err != nil || item.Name != "sub" {
		t.Errorf("m_asst.2 after the delete: %v %v", item, err)
	}
	_, err = e.a.Conversations.Items.Get(ctx, th.ID(), "m_asst.1", conversations.ItemGetParams{})
	apiError(t, err, http.StatusNotFound)
	_, err = e.a.Conversations.Items.Delete(ctx, th.ID(), "m_asst.1") // a retry deletes nothing more
	apiError(t, err, http.StatusNotFound)
	// Deleting item 0 of a message leaves its other items their ids too.
	if _, err := e.a.Conversations.Items.Delete(ctx, th.ID(), "m_tool"); err != nil {
		t.Fatal(err)
	}
	if item, err := e.a.Conversations.Items.Get(ctx, th.ID(), "m_tool.1", conversations.ItemGetParams{}); err != nil || item.CallID != "c2" {
		t.Errorf("m_tool.1 after deleting m_tool: %v %v", item, err)
	}
	_, err = e.a.Conversations.Items.Delete(ctx, th.ID(), "m_tool")
	apiError(t, err, http.StatusNotFound)
	if err := msgs.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	// A fork made by loom's own API is a conversation the SDK uses at once.
	fork, err := msgs.Fork(ctx, thread.ForkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.a.Conversations.Items.New(ctx, fork.ID(), conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{userItem("on the fork")}}); err != nil {
		t.Fatal(err)
	}
	page, err = e.a.Conversations.Items.List(ctx, fork.ID(), conversations.ItemListParams{Limit: param.NewOpt[int64](1)})
	if err != nil || brief(t, page.Data[0].RawJSON()) != "user:on the fork" {
		t.Errorf("fork: %v %v", page, err)
	}
	conv, err := e.a.Conversations.Get(ctx, fork.ID())
	if err != nil || conv.ID != fork.ID() || !strings.Contains(conv.RawJSON(), `"metadata":{}`) {
		t.Errorf("fork as a conversation: %v %v", conv, err)
	}
	// An item from before the fork point: the fork's history has no
	// version without it, so its line is made anew.
	if _, err := e.a.Conversations.Items.Delete(ctx, fork.ID(), "m_user"); err != nil {
		t.Fatal(err)
	}
	if err := fork.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	forked, err := fork.Messages(ctx, thread.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var forkIDs []string
	for _, m := range forked {
		forkIDs = append(forkIDs, m.ID)
	}
	if diff := cmp.Diff([]string{"m_asst", "m_asst.2", "m_tool.1"}, forkIDs[:len(forkIDs)-1]); diff != "" || forked[len(forked)-1].Text() != "on the fork" {
		t.Errorf("fork after deleting m_user (-want +got):\n%s", diff)
	}
	// The original thread keeps it.
	orig, err := msgs.Messages(ctx, thread.ReadOptions{})
	if err != nil || orig[0].ID != "m_user" {
		t.Errorf("the original lost m_user: %v", err)
	}
}

// TestItemsKeptWhole: what a message cannot hold of an item (annotations,
// an unknown item type) reads back as it was given.
func TestItemsKeptWhole(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	conv, err := e.a.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}
	given := []string{
		`{"type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"see x.org","annotations":[{"type":"url_citation","url":"https://x.org","start_index":4,"end_index":9,"title":"X"}],"logprobs":[]}]}`,
		`{"type":"web_search_call","status":"completed","action":{"type":"search","query":"loom"}}`,
		`{"type":"message","role":"assistant","status":"completed","content":[{"type":"refusal","refusal":"I cannot."}]}`,
	}
	var items []any
	for _, g := range given {
		items = append(items, json.RawMessage(g))
	}
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := e.a.Execute(ctx, "POST", "conversations/"+conv.ID+"/items", map[string]any{"items": items}, &list); err != nil {
		t.Fatal(err)
	}
	for i, raw := range list.Data {
		var got, want map[string]any
		json.Unmarshal(raw, &got)
		json.Unmarshal([]byte(given[i]), &want)
		want["id"] = got["id"]
		if !cmp.Equal(want, got) {
			t.Errorf("item %d read back as\n %s\nwant\n %s", i, raw, given[i])
		}
		item, err := e.a.Conversations.Items.Get(ctx, conv.ID, got["id"].(string), conversations.ItemGetParams{})
		if err != nil || item.RawJSON() != strings.TrimSpace(string(raw)) {
			t.Errorf("item %d retrieved as %v, listed as %s (%v)", i, item.RawJSON(), raw, err)
		}
	}
	// The model is sent the text all the same.
	th, err := e.tenantA.Thread(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := th.Messages(ctx, thread.ReadOptions{})
	if err != nil || msgs[0].Text() != "see x.org" {
		t.Errorf("message 0: %+v %v", msgs, err)
	}
}

// TestServiceThreadReadOnly: a service-managed thread reads as a
// conversation, and every write to it is refused.
func TestServiceThreadReadOnly(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	th, err := e.tenantA.Create(ctx, thread.CreateOptions{ID: "th_service", Kind: thread.KindService})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.a.Conversations.Get(ctx, th.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.a.Conversations.Items.List(ctx, th.ID(), conversations.ItemListParams{}); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"items": func() error {
			_, err := e.a.Conversations.Items.New(ctx, th.ID(), conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{userItem("x")}})
			return err
		},
		"update": func() error {
			_, err := e.a.Conversations.Update(ctx, th.ID(), conversations.ConversationUpdateParams{Metadata: shared.Metadata{"a": "b"}})
			return err
		},
		"delete": func() error { _, err := e.a.Conversations.Delete(ctx, th.ID()); return err },
	} {
		if e := apiError(t, call(), http.StatusBadRequest); !strings.Contains(e.Message, "service-managed") {
			t.Errorf("%s: %s", name, e.RawJSON())
		}
	}
	if err := th.Refresh(ctx); err != nil || th.Version() != 1 {
		t.Errorf("the service thread moved: v%d %v", th.Version(), err)
	}
}

// TestTenants: a conversation is its tenant's; a wrong key is OpenAI's 401.
func TestTenants(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	conv, err := e.a.Conversations.New(ctx, conversations.ConversationNewParams{Items: []responses.ResponseInputItemUnionParam{userItem("secret")}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.b.Conversations.Get(ctx, conv.ID)
	apiError(t, err, http.StatusNotFound)
	_, err = e.b.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{})
	apiError(t, err, http.StatusNotFound)
	_, err = e.b.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{userItem("x")}})
	apiError(t, err, http.StatusNotFound)
	_, err = e.b.Conversations.Delete(ctx, conv.ID)
	apiError(t, err, http.StatusNotFound)
	if _, err := e.tenantA.Thread(ctx, conv.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.WithTenant("b").Thread(ctx, conv.ID); !errors.Is(err, thread.ErrNotFound) {
		t.Errorf("tenant b sees tenant a's thread: %v", err)
	}

	wrong := client(e.url, "not-a-key")
	_, err = wrong.Conversations.Get(ctx, conv.ID)
	ae := apiError(t, err, http.StatusUnauthorized)
	if ae.Code != "invalid_api_key" || ae.Type != "invalid_request_error" || ae.Message == "" {
		t.Errorf("401 body %s", ae.RawJSON())
	}
	none := openai.NewClient(option.WithBaseURL(e.url+openaiapi.Prefix+"/"), option.WithAPIKey(""), option.WithMaxRetries(0))
	_, err = none.Conversations.New(ctx, conversations.ConversationNewParams{})
	apiError(t, err, http.StatusUnauthorized)
}

// TestNotFound: unknown conversations, items and cursors are OpenAI's 404s.
func TestNotFound(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	conv, err := e.a.Conversations.New(ctx, conversations.ConversationNewParams{Items: []responses.ResponseInputItemUnionParam{userItem("x")}})
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"get":    func() error { _, err := e.a.Conversations.Get(ctx, "conv_nope"); return err },
		"bad id": func() error { _, err := e.a.Conversations.Get(ctx, "conv nope/.."); return err },
		"update": func() error {
			_, err := e.a.Conversations.Update(ctx, "conv_nope", conversations.ConversationUpdateParams{Metadata: shared.Metadata{}})
			return err
		},
		"delete": func() error { _, err := e.a.Conversations.Delete(ctx, "conv_nope"); return err },
		"list": func() error {
			_, err := e.a.Conversations.Items.List(ctx, "conv_nope", conversations.ItemListParams{})
			return err
		},
		"item": func() error {
			_, err := e.a.Conversations.Items.Get(ctx, conv.ID, "msg_nope", conversations.ItemGetParams{})
			return err
		},
		"sub-item": func() error {
			_, err := e.a.Conversations.Items.Get(ctx, conv.ID, "msg_nope.1", conversations.ItemGetParams{})
			return err
		},
		"delete item": func() error { _, err := e.a.Conversations.Items.Delete(ctx, conv.ID, "msg_nope"); return err },
		"after desc": func() error {
			_, err := e.a.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{After: param.NewOpt("msg_nope")})
			return err
		},
		"after asc": func() error {
			_, err := e.a.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{After: param.NewOpt("msg_nope"), Order: "asc"})
			return err
		},
		"after sub-id": func() error {
			_, err := e.a.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{After: param.NewOpt("msg_nope.2")})
			return err
		},
		"unknown route": func() error { return e.a.Get(ctx, "conversations/"+conv.ID+"/nothing", nil, nil) },
	} {
		err := call()
		ae := apiError(t, err, http.StatusNotFound)
		if ae.Type != "invalid_request_error" || ae.Message == "" {
			t.Errorf("%s: %s", name, ae.RawJSON())
		}
	}
}

// TestBadInput: a 400 with the param, and nothing changed.
func TestBadInput(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	conv, err := e.a.Conversations.New(ctx, conversations.ConversationNewParams{Items: []responses.ResponseInputItemUnionParam{userItem("x")}, Metadata: shared.Metadata{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	th, err := e.tenantA.Thread(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	tooMany := map[string]any{}
	for i := range 17 {
		tooMany[fmt.Sprint("k", i)] = "v"
	}
	path := "conversations/" + conv.ID
	for _, tc := range []struct {
		name, method, path string
		body               any
		param              string
	}{
		{"17 pairs", "POST", path, map[string]any{"metadata": tooMany}, "metadata"},
		{"long key", "POST", path, map[string]any{"metadata": map[string]any{strings.Repeat("k", 65): "v"}}, "metadata"},
		{"long value", "POST", path, map[string]any{"metadata": map[string]any{"k": strings.Repeat("v", 513)}}, "metadata.k"},
		{"number value", "POST", path, map[string]any{"metadata": map[string]any{"k": 1}}, "metadata.k"},
		{"no metadata", "POST", path, map[string]any{}, "metadata"},
		{"unknown member", "POST", path, map[string]any{"metadata": map[string]any{}, "title": "x"}, "title"},
		{"create 17 pairs", "POST", "conversations", map[string]any{"metadata": tooMany}, "metadata"},
		{"create bad item", "POST", "conversations", map[string]any{"items": []any{map[string]any{"role": "user", "content": "ok"}, map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_image"}}}}}, "items[1].content[0].image_url"},
		{"no items", "POST", path + "/items", map[string]any{}, "items"},
		{"empty items", "POST", path + "/items", map[string]any{"items": []any{}}, "items"},
		{"image_url no URL", "POST", path + "/items", map[string]any{"items": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_image", "image_url": "not a url", "detail": "auto"}}}}}, "items[0].content[0].image_url"},
		{"item without call_id", "POST", path + "/items", map[string]any{"items": []any{map[string]any{"type": "function_call_output", "output": "x"}}}, "items[0].call_id"},
		{"item with a bad id", "POST", path + "/items", map[string]any{"items": []any{map[string]any{"id": "../x", "role": "user", "content": "x"}}}, "items[0].id"},
		{"item id taken", "POST", path + "/items", map[string]any{"items": []any{map[string]any{"id": "fresh_1", "role": "user", "content": "x"}, map[string]any{"id": "fresh_1", "role": "user", "content": "y"}}}, "items[1].id"},
		{"bad include", "POST", path + "/items?include=everything", map[string]any{"items": []any{map[string]any{"role": "user", "content": "x"}}}, "include"},
		{"limit 0", "GET", path + "/items?limit=0", nil, "limit"},
		{"limit 101", "GET", path + "/items?limit=101", nil, "limit"},
		{"order", "GET", path + "/items?order=up", nil, "order"},
		{"unknown query", "GET", path + "/items?before=x", nil, "before"},
	} {
		err := e.a.Execute(ctx, tc.method, tc.path, tc.body, nil)
		ae := apiError(t, err, http.StatusBadRequest)
		if ae.Param != tc.param || ae.Type != "invalid_request_error" || ae.Message == "" {
			t.Errorf("%s: %s, want param %s", tc.name, ae.RawJSON(), tc.param)
		}
	}
	if err := th.Refresh(ctx); err != nil || th.Version() != 1 {
		t.Errorf("the conversation moved: v%d %v", th.Version(), err)
	}
	got, err := e.a.Conversations.Get(ctx, conv.ID)
	if err != nil || got.Metadata.(map[string]any)["k"] != "v" || len(got.Metadata.(map[string]any)) != 1 {
		t.Errorf("metadata %v %v", got, err)
	}
	n := 0
	for range e.tenantA.Threads(ctx, thread.ListOptions{}) {
		n++
	}
	if n != 1 {
		t.Errorf("%d threads after refused creates", n)
	}
	// An item the same id as one on the thread is a conflict, not a 500.
	page, _ := e.a.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{})
	// It says not to retry: the SDKs retry a 409 unless told.
	err = e.a.Execute(ctx, "POST", path+"/items", map[string]any{"items": []any{map[string]any{"id": page.Data[0].ID, "role": "user", "content": "again"}}}, nil)
	if ae := apiError(t, err, http.StatusConflict); ae.Param != "items[0].id" || !strings.Contains(ae.Message, "already in the conversation") || ae.Response.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("%s %v", ae.RawJSON(), ae.Response.Header)
	}
	// However the id member is spelled.
	escaped := `{"items":[{"\u0069d":"` + page.Data[0].ID + `","role":"user","content":"again"}]}`
	err = e.a.Execute(ctx, "POST", path+"/items", json.RawMessage(escaped), nil)
	if ae := apiError(t, err, http.StatusConflict); ae.Param != "items[0].id" {
		t.Errorf("escaped id member: %s", ae.RawJSON())
	}
	if err := th.Refresh(ctx); err != nil || th.Version() != 1 {
		t.Errorf("the conversation moved: v%d %v", th.Version(), err)
	}
}

// TestConcurrentItemCreates: many clients adding items to one
// conversation at once lose none.
func TestConcurrentItemCreates(t *testing.T) {
	onStores(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		conv, err := e.a.Conversations.New(ctx, conversations.ConversationNewParams{})
		if err != nil {
			t.Fatal(err)
		}
		const workers, each = 8, 10
		var wg sync.WaitGroup
		errs := make(chan error, workers*each)
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					_, err := e.a.Conversations.Items.New(context.WithoutCancel(ctx), conv.ID, conversations.ItemNewParams{
						Items: []responses.ResponseInputItemUnionParam{userItem(fmt.Sprintf("w%d-%d", w, i)), assistantItem("ok")}})
					if err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		seen := map[string]bool{}
		pager := e.a.Conversations.Items.ListAutoPaging(ctx, conv.ID, conversations.ItemListParams{Limit: param.NewOpt[int64](100), Order: "asc"})
		prev := ""
		for pager.Next() {
			b := brief(t, pager.Current().RawJSON())
			if strings.HasPrefix(prev, "user:") && b != "assistant:ok" {
				t.Errorf("%s followed by %s: a batch was split", prev, b)
			}
			seen[b] = true
			prev = b
		}
		if err := pager.Err(); err != nil {
			t.Fatal(err)
		}
		for w := range workers {
			for i := range each {
				if !seen[fmt.Sprintf("user:w%d-%d", w, i)] {
					t.Errorf("item w%d-%d lost", w, i)
				}
			}
		}
	})
}

// TestBodyTooLarge: loom's body limit answers in OpenAI's shape, and the
// conversation is not made.
func TestBodyTooLarge(t *testing.T) {
	e := newEnvWith(t, httpapi.Options{MaxBodyBytes: 1 << 10})
	_, err := e.a.Conversations.New(t.Context(), conversations.ConversationNewParams{Items: []responses.ResponseInputItemUnionParam{userItem(strings.Repeat("x", 2<<10))}})
	ae := apiError(t, err, http.StatusRequestEntityTooLarge)
	if ae.Type != "invalid_request_error" || ae.Message == "" {
		t.Errorf("413 body %s", ae.RawJSON())
	}
	for range e.tenantA.Threads(t.Context(), thread.ListOptions{}) {
		t.Error("a thread was made")
	}
}

// TestConcurrentWrites: item creates, item deletes and metadata updates on
// one conversation at once all succeed, and each is in the result.
func TestConcurrentWrites(t *testing.T) {
	onStores(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		var seed []responses.ResponseInputItemUnionParam
		for i := range 8 {
			seed = append(seed, userItem(fmt.Sprint("old ", i)))
		}
		conv, err := e.a.Conversations.New(ctx, conversations.ConversationNewParams{Items: seed})
		if err != nil {
			t.Fatal(err)
		}
		page, err := e.a.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for w := range 3 {
			wg.Go(func() {
				for i := range 6 {
					if _, err := e.a.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{
						Items: []responses.ResponseInputItemUnionParam{userItem(fmt.Sprintf("new %d-%d", w, i))}}); err != nil {
						errs <- fmt.Errorf("create: %w", err)
					}
				}
			})
		}
		wg.Go(func() {
			for _, it := range page.Data {
				if _, err := e.a.Conversations.Items.Delete(ctx, conv.ID, it.ID); err != nil {
					errs <- fmt.Errorf("delete %s: %w", it.ID, err)
				}
			}
		})
		wg.Go(func() {
			for i := range 6 {
				if _, err := e.a.Conversations.Update(ctx, conv.ID, conversations.ConversationUpdateParams{Metadata: shared.Metadata{"n": fmt.Sprint(i)}}); err != nil {
					errs <- fmt.Errorf("update: %w", err)
				}
			}
		})
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		var got []string
		pager := e.a.Conversations.Items.ListAutoPaging(ctx, conv.ID, conversations.ItemListParams{Order: "asc", Limit: param.NewOpt[int64](100)})
		for pager.Next() {
			got = append(got, brief(t, pager.Current().RawJSON()))
		}
		if err := pager.Err(); err != nil {
			t.Fatal(err)
		}
		if len(got) != 18 {
			t.Errorf("%d items, want the 18 new ones: %v", len(got), got)
		}
		for _, b := range got {
			if !strings.HasPrefix(b, "user:new ") {
				t.Errorf("item %s survived its delete", b)
			}
		}
		c, err := e.a.Conversations.Get(ctx, conv.ID)
		if err != nil || c.Metadata.(map[string]any)["n"] != "5" {
			t.Errorf("metadata %v %v", c, err)
		}
	})
}

// TestDeleteItemTailLimit: an item with more messages after it than one
// commit takes cannot be deleted, and the answer says why in OpenAI's
// words; nothing changes.
func TestDeleteItemTailLimit(t *testing.T) {
	db := thread.New(thread.NewMemoryStore(), &thread.Options{Limits: thread.Limits{MessagesPerCommit: 5}})
	e := newEnv(t, db)
	ctx := t.Context()
	conv, err := e.a.Conversations.New(ctx, conversations.ConversationNewParams{Items: []responses.ResponseInputItemUnionParam{userItem("first")}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if _, err := e.a.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{userItem(fmt.Sprint(i))}}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := e.a.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Order: "asc"})
	if err != nil {
		t.Fatal(err)
	}
	th, err := e.tenantA.Thread(ctx, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.a.Conversations.Items.Delete(ctx, conv.ID, page.Data[0].ID)
	if ae := apiError(t, err, http.StatusBadRequest); ae.Param != "item_id" || !strings.Contains(ae.Message, "loom does not support") || !strings.Contains(ae.Message, "has 6") {
		t.Errorf("delete of the first item: %s", ae.RawJSON())
	}
	if err := th.Refresh(ctx); err != nil || th.Version() != 7 {
		t.Errorf("the conversation moved: v%d %v", th.Version(), err)
	}
	// An item with 5 after it can go.
	if _, err := e.a.Conversations.Items.Delete(ctx, conv.ID, page.Data[1].ID); err != nil {
		t.Fatal(err)
	}
}
