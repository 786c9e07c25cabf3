package redis

import "time"

// SetClock replaces the store's clock, for tests of expiry.
func SetClock(s *Store, now func() time.Time) { s.now = now }
