package httpapi

import (
	"encoding/json"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loomthreads/loom/conversation"
	"github.com/loomthreads/loom/langgraph"
	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/workflow"
	"github.com/loomthreads/loom/worklog"
)

func loadOpenAPI(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if doc["openapi"] != "3.1.0" {
		t.Errorf("openapi version %v", doc["openapi"])
	}
	return doc
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// TestOpenAPICoversRoutes checks that openapi.json has an operation for
// every route of the route table and none that is not a route, and that
// each operation declares its path parameters and a success response.
func TestOpenAPICoversRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	paths, _ := doc["paths"].(map[string]any)
	documented := map[string]bool{}
	for path, item := range paths {
		item := item.(map[string]any)
		for _, m := range httpMethods {
			op, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			key := strings.ToUpper(m) + " " + path
			documented[key] = true
			if id, _ := op["operationId"].(string); id == "" {
				t.Errorf("%s: no operationId", key)
			}
			if sum, _ := op["summary"].(string); sum == "" {
				t.Errorf("%s: no summary", key)
			}
			// Path parameters, at the path's level or the operation's.
			declared := map[string]bool{}
			for _, list := range []any{item["parameters"], op["parameters"]} {
				ps, _ := list.([]any)
				for _, p := range ps {
					p := resolve(t, doc, p.(map[string]any))
					if p["in"] == "path" {
						declared[p["name"].(string)] = true
					}
				}
			}
			for _, m := range regexp.MustCompile(`\{(\w+)\}`).FindAllStringSubmatch(path, -1) {
				if !declared[m[1]] {
					t.Errorf("%s: path parameter %s not declared", key, m[1])
				}
			}
			resps, _ := op["responses"].(map[string]any)
			if !slices.ContainsFunc(slices.Collect(maps.Keys(resps)), func(code string) bool { return strings.HasPrefix(code, "2") }) {
				t.Errorf("%s: no success response", key)
			}
		}
	}
	routed := map[string]bool{}
	for _, rt := range routes {
		routed[rt.pattern] = true
	}
	if diff := cmp.Diff(slices.Sorted(maps.Keys(routed)), slices.Sorted(maps.Keys(documented))); diff != "" {
		t.Errorf("routes (-) and documented operations (+) differ:\n%s", diff)
	}
	// Every $ref points at something.
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				resolve(t, doc, v)
				_ = ref
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
}

// resolve follows a local $ref ("#/components/…").
func resolve(t *testing.T, doc, v map[string]any) map[string]any {
	t.Helper()
	ref, ok := v["$ref"].(string)
	if !ok {
		return v
	}
	cur := any(doc)
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		m, ok := cur.(map[string]any)
		if !ok || m[part] == nil {
			t.Errorf("$ref %s does not resolve", ref)
			return map[string]any{}
		}
		cur = m[part]
	}
	return cur.(map[string]any)
}

// TestOpenAPISchemasMatchTypes checks that the schemas of the bodies have
// exactly the JSON members of the Go types that read and write them.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	schemas := loadOpenAPI(t)["components"].(map[string]any)["schemas"].(map[string]any)
	for name, v := range map[string]any{
		"CreateThreadRequest":        createRequest{},
		"PatchThreadRequest":         patchRequest{},
		"AppendRequest":              appendRequest{},
		"ViewRequest":                viewRequest{},
		"ForkRequest":                forkRequest{},
		"CopyRequest":                copyRequest{},
		"CheckpointRequest":          checkpointRequest{},
		"RollbackRequest":            rollbackRequest{},
		"RunRequest":                 runRequest{},
		"Approval":                   approvalRequest{},
		"Thread":                     threadJSON{},
		"ThreadList":                 listResponse{},
		"MessageList":                messagesResponse{},
		"Commit":                     commitResponse{},
		"View":                       viewResponse{},
		"HistoryEntry":               historyEntryJSON{},
		"HistoryPage":                historyResponse{},
		"Checkpoint":                 checkpointJSON{},
		"CheckpointList":             checkpointsResponse{},
		"RunResult":                  runResponse{},
		"Update":                     updateJSON{},
		"CallDelta":                  callDeltaJSON{},
		"Step":                       stepJSON{},
		"Health":                     healthResponse{},
		"ServerInfo":                 serverInfo{},
		"ErrorDetail":                errorJSON{},
		"Conversation":               conversationJSON{},
		"CreateConversationRequest":  createConversationRequest{},
		"ConversationCommand":        conversationCommand{},
		"ConversationEvent":          conversationEvent{},
		"ConversationList":           conversationsResponse{},
		"ConversationItem":           conversationItem{},
		"AgentStatus":                conversation.Status{},
		"ConversationMode":           conversation.Mode{},
		"Workflow":                   workflowJSON{},
		"WorkflowList":               workflowsResponse{},
		"WorkflowForkRequest":        workflowForkRequest{},
		"WorkflowInputRequest":       workflowInputRequest{},
		"WorkflowStartRequest":       workflowStartRequest{},
		"WorkflowDefinition":         definitionJSON{},
		"WorkflowDefinitionList":     definitionsResponse{},
		"WorkflowEvent":              workflow.Event{},
		"Execution":                  workflow.Execution{},
		"StepRun":                    workflow.StepRun{},
		"WorkflowSubThread":          workflow.SubThread{},
		"Lease":                      workflow.Lease{},
		"Waiting":                    workflow.Waiting{},
		"Error":                      errorBody{},
		"Family":                     familyResponse{},
		"Change":                     thread.Change{},
		"SearchHit":                  searchHitJSON{},
		"SearchResults":              searchResponse{},
		"SessionList":                sessionsResponse{},
		"Session":                    worklog.Session{},
		"LangGraphConfig":            langgraph.Config{},
		"LangGraphBlob":              langgraph.Blob{},
		"LangGraphValue":             langgraph.Value{},
		"LangGraphPutRequest":        langgraph.PutRequest{},
		"LangGraphPutResponse":       langgraph.PutResponse{},
		"LangGraphWrite":             langgraph.Write{},
		"LangGraphWritesRequest":     langgraph.WritesRequest{},
		"LangGraphPendingWrite":      langgraph.PendingWrite{},
		"LangGraphTuple":             langgraph.Tuple{},
		"LangGraphListRequest":       langgraph.ListRequest{},
		"LangGraphListResponse":      langgraph.ListResponse{},
		"LangGraphCopyRequest":       langgraph.CopyRequest{},
		"LangGraphPruneRequest":      langgraph.PruneRequest{},
		"LangGraphDeleteRunsRequest": langgraph.DeleteRunsRequest{},
		"LangGraphDeltaRequest":      langgraph.DeltaRequest{},
		"LangGraphDeltaHistory":      langgraph.DeltaHistory{},
		"LangGraphDeltaResponse":     langgraph.DeltaResponse{},
		"LangGraphMessagesSum":       langgraph.MessagesSum{},
		"LangGraphShare":             langgraph.Share{},
	} {
		s, ok := schemas[name].(map[string]any)
		if !ok {
			t.Errorf("no schema %s", name)
			continue
		}
		props, _ := s["properties"].(map[string]any)
		var want []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			if tag != "" && tag != "-" {
				want = append(want, tag)
			}
		}
		slices.Sort(want)
		if diff := cmp.Diff(want, slices.Sorted(maps.Keys(props))); diff != "" {
			t.Errorf("schema %s: Go members (-) and schema properties (+) differ:\n%s", name, diff)
		}
		if strings.HasSuffix(name, "Request") && s["additionalProperties"] != false {
			t.Errorf("schema %s allows unknown members, which the server refuses", name)
		}
	}
	// The strategies are the ones the server knows.
	for _, typ := range []string{"drop_oldest", "sliding_window", "elide_tool_results", "summarize"} {
		if !strings.Contains(string(openAPIDoc), `"const": "`+typ+`"`) {
			t.Errorf("strategy %s not documented", typ)
		}
	}
}

// TestOpenAPIQueryParametersAreTheRoutes: the query parameters each route
// takes (and refuses all others by) are exactly those its operation in
// openapi.json declares, so that a client the document generated never
// sends one the server refuses, nor misses one it takes.
func TestOpenAPIQueryParametersAreTheRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	paths, _ := doc["paths"].(map[string]any)
	for _, rt := range routes {
		method, path, _ := strings.Cut(rt.pattern, " ")
		item, _ := paths[path].(map[string]any)
		op, _ := item[strings.ToLower(method)].(map[string]any)
		if op == nil {
			continue // TestOpenAPICoversRoutes tells of it
		}
		documented := []string{}
		for _, list := range []any{item["parameters"], op["parameters"]} {
			ps, _ := list.([]any)
			for _, p := range ps {
				if p := resolve(t, doc, p.(map[string]any)); p["in"] == "query" {
					documented = append(documented, p["name"].(string))
				}
			}
		}
		taken := append([]string{}, rt.query...)
		slices.Sort(documented)
		slices.Sort(taken)
		if diff := cmp.Diff(taken, documented); diff != "" {
			t.Errorf("%s: query parameters taken (-) and documented (+) differ:\n%s", rt.pattern, diff)
		}
	}
}
