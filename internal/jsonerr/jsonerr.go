// Package jsonerr tells the errors of encoding/json in JSON's words:
// "id: expected a string, got a number" where encoding/json says "cannot
// unmarshal number into Go struct field createRequest.id of type string".
// Every face that decodes a client's JSON (the HTTP API's bodies, package
// thread's documents) words its errors with it, so that no Go type, field
// or package name reaches a client.
package jsonerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Describe writes err, an error of encoding/json decoding into v (nil
// when unknown), as a sentence about JSON for the person who wrote it: the text of any type or
// syntax error in err's chain is replaced by one that names the member
// and what it should hold.
func Describe(v any, err error) string {
	text := err.Error()
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		text = strings.Replace(text, te.Error(), typeErrorText(v, te), 1)
	case errors.As(err, &se):
		text = strings.Replace(text, se.Error(), fmt.Sprintf("not valid JSON at byte %d: %s", se.Offset, se.Error()), 1)
	case errors.Is(err, io.ErrUnexpectedEOF):
		text = "not valid JSON: it ends before its last value does"
	}
	// encoding/json's other errors start with "json: ", as in
	// `json: unknown field "x"`.
	text = strings.ReplaceAll(text, "json: unknown field ", "unknown member ")
	return strings.ReplaceAll(text, "json: ", "")
}

// typeErrorText says what a member should have held and what it held.
func typeErrorText(v any, e *json.UnmarshalTypeError) string {
	want := jsonKind(e.Type)
	// e.Field is the member's path from the body, in JSON names. A type
	// error inside a map or an array names the map or array: say so.
	if t := memberType(v, e.Field); t != nil && t != e.Type {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Map:
			want += " as each value"
		case reflect.Slice, reflect.Array:
			want += " as each item"
		}
	}
	got := e.Value
	switch {
	case got == "number":
		got = "a number"
	case strings.HasPrefix(got, "number "):
		got = "the number " + strings.TrimPrefix(got, "number ")
	case got == "string":
		got = "a string"
	case got == "bool":
		got = "true or false"
	case got == "array":
		got = "an array"
	case got == "object":
		got = "an object"
	}
	if e.Field == "" {
		return fmt.Sprintf("expected a JSON %s, got %s", strings.TrimPrefix(strings.TrimPrefix(want, "an "), "a "), got)
	}
	return fmt.Sprintf("%s: expected %s, got %s", e.Field, want, got)
}

// jsonKind names the JSON value that Go type t is read from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "a value"
}

// memberType returns the Go type of the member of v at path (JSON names
// joined by "."), or nil when it cannot be followed.
func memberType(v any, path string) reflect.Type {
	if v == nil || path == "" {
		return nil
	}
	t := reflect.TypeOf(v)
	for name := range strings.SplitSeq(path, ".") {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldByJSONName(t, name)
			if !ok {
				return nil
			}
			t = f.Type
		case reflect.Map, reflect.Slice, reflect.Array:
			t = t.Elem()
		default:
			return nil
		}
	}
	return t
}

func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name || tag == "" && f.Name == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
