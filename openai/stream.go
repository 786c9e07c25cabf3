package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/loomthreads/loom/agent"
	"github.com/loomthreads/loom/message"
)

// isJSON reports whether a streamed request was answered with one JSON body,
// as some compatible servers do when they cannot stream.
func isJSON(res *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

func decodeJSON(res *http.Response, v any) error {
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if err := eventError(b); err != nil {
		return err
	}
	if string(bytes.TrimSpace(b)) == "null" {
		return errors.New("response body is null")
	}
	return json.Unmarshal(b, v)
}

// eventError reads an error sent in place of a chunk or an event:
// {"error": {"message", "type", "code"}}, or {"error": "text"} as some
// compatible servers write it. It returns nil for anything else.
func eventError(data []byte) error {
	var v struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &v) != nil || len(v.Error) == 0 || string(v.Error) == "null" {
		return nil
	}
	pe := &agent.ProviderError{Provider: provider}
	var obj struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(v.Error, &pe.Message) != nil && json.Unmarshal(v.Error, &obj) == nil {
		pe.Message, pe.Type = obj.Message, obj.Type
		if pe.Type == "" {
			var code string
			if json.Unmarshal(obj.Code, &code) == nil {
				pe.Type = code
			} else if len(obj.Code) > 0 && string(obj.Code) != "null" {
				pe.Type = string(obj.Code)
			}
		}
	}
	if pe.Message == "" && pe.Type == "" {
		pe.Message = "error event without a message"
	}
	return pe
}

// replay yields a whole response as the deltas a stream of it would have
// had, then the response.
func replay(yield func(agent.Update, error) bool, resp *agent.ChatResponse, err error) {
	if err != nil {
		yield(agent.Update{}, err)
		return
	}
	var calls int
	for _, m := range resp.Messages {
		for _, c := range m.Contents {
			var u agent.Update
			switch c := c.(type) {
			case message.Reasoning:
				u.Reasoning = c.Text
			case message.Text:
				u.Text = c.Text
			case message.FunctionCall:
				u.Call = &agent.CallDelta{Index: calls, CallID: c.CallID, Name: c.Name, Arguments: c.Arguments}
				calls++
			}
			if u.Reasoning == "" && u.Text == "" && u.Call == nil {
				continue
			}
			if !yield(u, nil) {
				return
			}
		}
	}
	if resp.Usage != (message.Usage{}) {
		u := resp.Usage
		if !yield(agent.Update{Usage: &u}, nil) {
			return
		}
	}
	yield(agent.Update{Response: resp}, nil)
}
