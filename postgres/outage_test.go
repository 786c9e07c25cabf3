package postgres

import (
	"testing"
	"time"

	"github.com/loomthreads/loom/internal/faultproxy"
	"github.com/loomthreads/loom/internal/testserver"
)

// TestOutages: with PostgreSQL black-holed, down or reset in flight, every
// read and write fails with thread.ErrUnavailable by the store's deadline
// (the URL's connect_timeout and timeout) instead of hanging for the whole
// outage, and once the network heals the same Store serves again and has
// lost nothing it acknowledged.
func TestOutages(t *testing.T) {
	const deadline = 500 * time.Millisecond
	p, storeURL := faultproxy.StartStore(t, testserver.Postgres(t), deadline)
	faultproxy.Outages(t, open(t, storeURL, nil), p, "PostgreSQL", 20*deadline)
}
