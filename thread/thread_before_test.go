package thread_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// Paging back with Before and Last reads every message once, in order,
// across commits of several messages, and at an older version.
func TestMessagesBefore(t *testing.T) {
	ctx := t.Context()
	db := thread.New(thread.NewMemoryStore(), nil)
	th, err := db.Create(ctx, thread.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 10 {
		batch := make([]message.Message, i%3+1)
		for k := range batch {
			text := fmt.Sprintf("m%d.%d", i, k)
			batch[k] = message.User(text)
			want = append(want, text)
		}
		if _, err := th.Append(ctx, batch...); err != nil {
			t.Fatal(err)
		}
	}
	texts := func(ms []message.Message) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Text())
		}
		return out
	}
	for _, page := range []int{1, 2, 3, 7, 100} {
		var got []string
		msgs, err := th.Messages(ctx, thread.ReadOptions{Last: page})
		if err != nil {
			t.Fatal(err)
		}
		for len(msgs) > 0 {
			got = append(texts(msgs), got...)
			if msgs, err = th.Messages(ctx, thread.ReadOptions{Last: page, Before: msgs[0].ID}); err != nil {
				t.Fatal(err)
			}
			if len(msgs) > page {
				t.Fatalf("page of %d messages, want at most %d", len(msgs), page)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("pages of %d: %v, want %v", page, got, want)
		}
	}
	all, _ := th.Messages(ctx, thread.ReadOptions{})
	before, err := th.Messages(ctx, thread.ReadOptions{Before: all[5].ID})
	if err != nil || !slices.Equal(texts(before), want[:5]) {
		t.Errorf("everything before the sixth: %v, %v", texts(before), err)
	}
	// At version 3 (two commits), a later message is not there.
	if _, err := th.Messages(ctx, thread.ReadOptions{Version: 3, Before: all[len(all)-1].ID}); !errors.Is(err, thread.ErrNotFound) {
		t.Errorf("a message of a later version: %v, want ErrNotFound", err)
	}
	old, err := th.Messages(ctx, thread.ReadOptions{Version: 3, Before: all[2].ID, Last: 1})
	if err != nil || !slices.Equal(texts(old), want[1:2]) {
		t.Errorf("at version 3 before the third: %v, %v", texts(old), err)
	}
	if _, err := th.Messages(ctx, thread.ReadOptions{Before: "m_nope"}); !errors.Is(err, thread.ErrNotFound) {
		t.Errorf("unknown message: %v, want ErrNotFound", err)
	}
	empty, _ := db.Create(ctx, thread.CreateOptions{})
	if _, err := empty.Messages(ctx, thread.ReadOptions{Before: all[0].ID}); !errors.Is(err, thread.ErrNotFound) {
		t.Errorf("empty thread: %v, want ErrNotFound", err)
	}
	first, err := th.Messages(ctx, thread.ReadOptions{Before: all[0].ID})
	if err != nil || len(first) != 0 {
		t.Errorf("before the first: %v, %v", first, err)
	}
}
