package redis

import (
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// SetClock replaces the store's clock, for tests of expiry.
func SetClock(s *Store, now func() time.Time) { s.now = now }

// SetHook sets a function that apply calls at "script" (before its script
// runs) and "cleanup" (after the script applied the batch).
func SetHook(s *Store, hook func(stage string)) { s.hook = hook }

// SetMigrationLockTTL sets how long the migration lock lasts without a
// renewal, until the returned function restores it. Not for parallel tests.
func SetMigrationLockTTL(d time.Duration) (restore func()) {
	old := migrationLockTTL
	migrationLockTTL = d
	return func() { migrationLockTTL = old }
}

// Timeouts returns the dial, read and write timeouts of the client the
// store dialed, and the deadline of each of its commands.
func Timeouts(s *Store) (dial, read, write, command time.Duration) {
	o := s.rdb.(*goredis.Client).Options()
	return o.DialTimeout, o.ReadTimeout, o.WriteTimeout, s.timeout
}
