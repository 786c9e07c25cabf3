package thread

import (
	"sync"
	"testing"
)

// TestSharedIsTheDBs checks that what DB.Shared keeps belongs to the DB
// that New returned: its copies get the same value, made once even when
// asked for at once, and another DB on the same store gets its own.
func TestSharedIsTheDBs(t *testing.T) {
	type key struct{}
	s := NewMemoryStore()
	db := New(s, nil)
	made := 0
	var mu sync.Mutex
	newValue := func() any {
		mu.Lock()
		defer mu.Unlock()
		made++
		return new(int)
	}
	var wg sync.WaitGroup
	got := make([]any, 8)
	for i := range got {
		wg.Go(func() { got[i] = db.WithTenant("acme").Shared(key{}, newValue) })
	}
	wg.Wait()
	for i, v := range got {
		if v != got[0] {
			t.Fatalf("call %d got another value than call 0", i)
		}
	}
	if v := db.WithTracerProvider(nil).Shared(key{}, newValue); v != got[0] {
		t.Error("a WithTracerProvider copy got another value")
	}
	if v := New(s, nil).Shared(key{}, newValue); v == got[0] {
		t.Error("another DB on the same store got this DB's value")
	}
}
