package worklog

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// scanObject splits a JSON object that is known to be valid (it was
// decoded already) into its members, as objectFields does, without
// checking it again: the member values are slices of b. It reports false
// if b is not an object after all.
func scanObject(b []byte) ([]field, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	fields := make([]field, 0, 8)
	for i++; ; {
		i = skipSpace(b, i)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case '}':
			return fields, true
		case ',':
			i++
			continue
		case '"':
		default:
			return nil, false
		}
		end := stringEnd(b, i)
		if end < 0 {
			return nil, false
		}
		key, ok := unquote(b[i:end])
		if !ok {
			return nil, false
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipSpace(b, i+1)
		vend := valueEnd(b, i)
		if vend < 0 {
			return nil, false
		}
		fields = append(fields, field{key, b[i:vend]})
		i = vend
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the string that starts at b[i], -1
// if it does not end.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// valueEnd returns the index after the value that starts at b[i], -1 if
// it does not end.
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				if j = stringEnd(b, j); j < 0 {
					return -1
				}
				j--
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for ; j < len(b); j++ {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return j
		}
	}
	return j
}

// unquote returns the string that the JSON string literal s (quotes
// included) holds, as encoding/json decodes it. It reports false if s is
// not a string literal.
func unquote(s []byte) (string, bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false
	}
	in := s[1 : len(s)-1]
	if bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
		return string(in), true
	}
	var v string
	if json.Unmarshal(s, &v) != nil {
		return "", false
	}
	return v, true
}
