package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/loomthreads/loom/thread"
	"github.com/loomthreads/loom/thread/store"
)

var _ store.Watcher = (*Store)(nil)

// changesChannel is the pub/sub channel on which the apply script
// publishes the changes of every batch it applies.
func (s *Store) changesChannel() string { return s.prefix + ":changes" }

// watchBuffer is how many notices the client holds for a listener before
// it stops reading its connection; Redis then buffers them, and cuts a
// listener that falls too far behind (client-output-buffer-limit pubsub),
// which the listener hears as a ChangeGap once it is back.
const watchBuffer = 1024

// Watch implements store.Watcher with Redis pub/sub: the apply script
// PUBLISHes the JSON of each batch's changes (store.Batch.Changes) on
// the channel P:changes in the same atomic step as its writes, so a
// change that is in Redis was announced (unless an ACL forbids the store's
// user the channel), and one that is not, was not.
// Watch subscribes, waits for Redis to confirm the subscription, and then
// calls fn from a goroutine of its own until ctx ends or the store is
// closed. When the connection drops, the client subscribes again by
// itself; once Redis confirms, fn hears a thread.ChangeGap, since what was
// published in between is lost. Redis keeps no backlog: a process hears
// only what is published while it listens.
//
// Classic PUBLISH, not the sharded SPUBLISH, in cluster mode too: the one
// channel of a store has a slot of its own, and a script that SPUBLISHes
// on a node that does not hold it is refused ("attempted to access a non
// local key"), while a PUBLISH reaches every node of the cluster,
// whichever the listener is connected to. A family lives on one node, so
// a thread's changes arrive in order; those of families on different
// nodes may interleave otherwise than they were applied.
func (s *Store) Watch(ctx context.Context, fn func([]thread.Change)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ps := s.rdb.Subscribe(ctx, s.changesChannel())
	if !s.addWatch(ps) {
		ps.Close()
		return fmt.Errorf("redis: watch: %w", goredis.ErrClosed)
	}
	// Closing the subscription ends the loop below, or the wait for the
	// confirmation, whatever the connection is doing.
	stop := context.AfterFunc(ctx, func() { ps.Close() })
	msg, err := ps.Receive(ctx)
	if err == nil {
		if _, ok := msg.(*goredis.Subscription); !ok {
			err = fmt.Errorf("unexpected reply %T to SUBSCRIBE", msg)
		}
	}
	if err != nil {
		stop()
		ps.Close()
		s.dropWatch(ps)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("redis: watch: %w", mapError(ctx, err))
	}
	// The client waits for room in ch rather than drop a notice; Redis
	// cuts a connection that falls too far behind instead, which is a gap.
	ch := ps.ChannelWithSubscriptions(goredis.WithChannelSize(watchBuffer), goredis.WithChannelSendTimeout(24*time.Hour))
	go func() {
		defer s.dropWatch(ps)
		defer stop()
		// Range to the end, which Close brings, so that the client's own
		// goroutines never wait on a full ch.
		for m := range ch {
			if ctx.Err() != nil {
				continue
			}
			switch m := m.(type) {
			case *goredis.Subscription:
				if m.Kind == "subscribe" {
					// The client reconnected and subscribed again.
					fn([]thread.Change{{Kind: thread.ChangeGap, Time: s.now().UTC()}})
				}
			case *goredis.Message:
				changes, err := decodeChanges(m.Payload)
				if err != nil {
					s.log.Warn("redis store: a notice of changes that does not decode", "channel", m.Channel, "err", err)
					changes = []thread.Change{{Kind: thread.ChangeGap, Time: s.now().UTC()}}
				}
				fn(changes)
			}
		}
	}()
	return nil
}

func decodeChanges(payload string) ([]thread.Change, error) {
	var changes []thread.Change
	if err := json.Unmarshal([]byte(payload), &changes); err != nil {
		return nil, err
	}
	if len(changes) == 0 {
		return nil, errors.New("no changes")
	}
	for i := range changes {
		changes[i].Time = changes[i].Time.UTC()
	}
	return changes, nil
}

// addWatch records a subscription for Close to end; false when the store
// is closed.
func (s *Store) addWatch(ps *goredis.PubSub) bool {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if s.watches == nil {
		return false
	}
	s.watches[ps] = struct{}{}
	return true
}

func (s *Store) dropWatch(ps *goredis.PubSub) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	delete(s.watches, ps)
}

// closeWatches ends every watch and refuses new ones.
func (s *Store) closeWatches() {
	s.watchMu.Lock()
	watches := s.watches
	s.watches = nil
	s.watchMu.Unlock()
	for ps := range watches {
		ps.Close()
	}
}
