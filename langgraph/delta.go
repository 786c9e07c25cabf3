package langgraph

import (
	"bytes"
	"encoding/json"
	"reflect"
)

// A checkpoint's header (its versions, what each node has seen, its id
// and time) differs from its parent's in a few entries; it is kept as the
// JSON merge patch (RFC 7386) from the parent's, and in full every
// headerChain checkpoints, so reading one costs at most that many commits.
const headerChain = 16

func decodeAny(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// mergeDiff returns the merge patch that turns a into b, and false when
// b cannot be reached by one (it holds a null, which a patch reads as a
// removal).
func mergeDiff(a, b map[string]any) (map[string]any, bool) {
	patch := map[string]any{}
	for k, bv := range b {
		if bv == nil {
			return nil, false
		}
		av, ok := a[k]
		if !ok {
			if hasNull(bv) {
				return nil, false
			}
			patch[k] = bv
			continue
		}
		ao, aObj := av.(map[string]any)
		bo, bObj := bv.(map[string]any)
		switch {
		case aObj && bObj:
			sub, ok := mergeDiff(ao, bo)
			if !ok {
				return nil, false
			}
			if len(sub) > 0 {
				patch[k] = sub
			}
		case !reflect.DeepEqual(av, bv):
			if hasNull(bv) {
				return nil, false
			}
			patch[k] = bv
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			patch[k] = nil
		}
	}
	return patch, true
}

func hasNull(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, x := range v {
			if hasNull(x) {
				return true
			}
		}
	}
	return false
}

// mergePatch applies patch to target (RFC 7386).
func mergePatch(target any, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	} else {
		c := make(map[string]any, len(t))
		for k, v := range t {
			c[k] = v
		}
		t = c
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergePatch(t[k], v)
	}
	return t
}
