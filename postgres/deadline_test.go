package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/loomthreads/loom/thread"
)

// TestDeadlineURL: the store's deadlines in a URL DSN, as Go durations or
// whole seconds (libpq's connect_timeout), leave the DSN that pgx parses;
// Options win over the URL, 0 in the URL means no deadline, and a bad
// value is refused with ErrInvalid.
func TestDeadlineURL(t *testing.T) {
	for _, tc := range []struct {
		dsn              string
		opts             Options
		connect, timeout time.Duration
		left             string
	}{
		{"postgres://u@h/db?sslmode=disable", Options{}, 0, 0, "postgres://u@h/db?sslmode=disable"},
		{"postgres://u@h/db?connect_timeout=3&timeout=500ms", Options{}, 3 * time.Second, 500 * time.Millisecond, "postgres://u@h/db"},
		{"postgresql://u@h/db?timeout=0", Options{}, 0, -1, "postgresql://u@h/db"},
		{"postgres://u@h/db?timeout=2s", Options{Timeout: time.Second}, 0, time.Second, "postgres://u@h/db"},
		{"host=h connect_timeout=3", Options{}, 0, 0, "host=h connect_timeout=3"},
	} {
		o := tc.opts
		left, err := takeTimeouts(tc.dsn, &o)
		if err != nil || left != tc.left || o.ConnectTimeout != tc.connect || o.Timeout != tc.timeout {
			t.Errorf("%s: %q %v %v %v, want %q %v %v", tc.dsn, left, o.ConnectTimeout, o.Timeout, err, tc.left, tc.connect, tc.timeout)
		}
	}
	for _, dsn := range []string{"postgres://h/db?timeout=soon", "postgres://h/db?connect_timeout=-1s"} {
		if _, err := takeTimeouts(dsn, &Options{}); !errors.Is(err, thread.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", dsn, err)
		}
	}
}
