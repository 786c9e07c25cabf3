package redis_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/loomthreads/loom/internal/testserver"
	"github.com/loomthreads/loom/internal/testwait"
	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/redis"
	"github.com/loomthreads/loom/thread"
)

// startCluster starts a Redis Cluster of n masters, each serving an equal
// range of slots, and returns the URL a store opens it by. Without
// redis-server on PATH it skips the test, or fails it where servers are
// required (testserver.Unavailable).
func startCluster(t testing.TB, n int) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testserver.Unavailable(t, "redis-server (cluster mode)", err)
	}
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
		dir := t.TempDir()
		cmd := exec.Command(bin, "--port", strconv.Itoa(ports[i]), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--cluster-enabled", "yes", "--cluster-config-file", dir+"/nodes.conf", "--dir", dir, "--protected-mode", "no")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		testserver.Track("redis-server (cluster)", "redis-server", cmd.Process.Pid, dir)
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		ready := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(out)
			ok := false
			for sc.Scan() {
				if !ok && strings.Contains(sc.Text(), "Ready to accept connections") {
					ok = true
					ready <- true
				}
			}
			if !ok {
				ready <- false
			}
		}()
		select {
		case ok := <-ready:
			if !ok {
				t.Fatalf("redis-server in cluster mode on port %d exited", ports[i])
			}
		case <-time.After(30 * time.Second):
			t.Fatal("redis-server in cluster mode did not start")
		}
	}
	ctx := t.Context()
	per := 16384 / n
	for i, p := range ports {
		c := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", p)})
		last := (i+1)*per - 1
		if i == n-1 {
			last = 16383
		}
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", i*per, last).Err(); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			if err := c.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(ports[0])).Err(); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
	}
	for _, p := range ports {
		c := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", p)})
		var info string
		if !testwait.Within(30*time.Second, func() bool {
			info, _ = c.ClusterInfo(ctx).Result()
			return strings.Contains(info, "cluster_state:ok") && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n))
		}) {
			t.Fatalf("cluster did not form: %s", info)
		}
		c.Close()
	}
	busCarriesPublish(t, ports)
	url := fmt.Sprintf("redis://127.0.0.1:%d?cluster=true", ports[0])
	for _, p := range ports[1:] {
		url += fmt.Sprintf("&addr=127.0.0.1:%d", p)
	}
	return url
}

// busCarriesPublish waits until a PUBLISH on any node of the cluster
// reaches a subscriber on every node. "cluster_state:ok" does not say that
// the cluster bus links between nodes are all up, and a PUBLISH made
// before a link is up is not carried over it (Redis pub/sub keeps nothing
// for later): a watcher would miss the first changes of the families on
// that node.
func busCarriesPublish(t testing.TB, ports []int) {
	t.Helper()
	ctx := t.Context()
	const channel = "loom-test-bus-probe"
	subs := make([]*goredis.PubSub, len(ports))
	for i, p := range ports {
		c := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", p)})
		t.Cleanup(func() { c.Close() })
		subs[i] = c.Subscribe(ctx, channel)
		t.Cleanup(func() { subs[i].Close() })
		if _, err := subs[i].Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for from, p := range ports {
		c := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", p)})
		defer c.Close()
		for to, sub := range subs {
			probe := fmt.Sprintf("%d->%d", from, to)
			deadline := time.Now().Add(30 * time.Second)
			for heard := false; !heard; {
				if time.Now().After(deadline) {
					t.Fatalf("the cluster bus did not carry a PUBLISH from node %d to node %d", from, to)
				}
				if err := c.Publish(ctx, channel, probe).Err(); err != nil {
					t.Fatal(err)
				}
				// Read what came within a moment: probes sent before the
				// link was up never come; those of earlier pairs may.
				for {
					rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
					m, err := sub.ReceiveMessage(rctx)
					cancel()
					if err != nil {
						break
					}
					if m.Payload == probe {
						heard = true
						break
					}
				}
			}
		}
	}
}

// TestWatchCluster watches a real three-node Redis Cluster: the apply
// script PUBLISHes on the node of each thread's family, and the listener,
// connected to one node, hears every family's changes in order.
func TestWatchCluster(t *testing.T) {
	url := startCluster(t, 3)
	ctx := t.Context()
	a, b := open(t, url, nil), open(t, url, nil)
	if _, ok := a.Client().(*goredis.ClusterClient); !ok {
		t.Fatalf("client %T, want a cluster client", a.Client())
	}
	f := watch(t, ctx, thread.New(a, nil))
	db := thread.New(b, nil)
	// Enough families that they land on every node.
	const threads = 12
	var want []short
	var ths []*thread.Thread
	for i := range threads {
		id := fmt.Sprintf("t%d", i)
		th, err := db.Create(ctx, thread.CreateOptions{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		ths = append(ths, th)
		want = append(want, short{thread.ChangeCreate, id, 1, ""})
	}
	for round := range 3 {
		for i, th := range ths {
			if _, err := th.Append(ctx, message.User(fmt.Sprint(round))); err != nil {
				t.Fatal(err)
			}
			want = append(want, short{thread.ChangeMove, fmt.Sprintf("t%d", i), int64(round + 2), ""})
		}
	}
	// Each thread's changes come in order; those of families on different
	// nodes interleave as the cluster bus brings them.
	f.expectPerThread(t, want...)

	nodes := map[string]bool{}
	for _, th := range ths {
		addr, err := nodeOf(ctx, b, th.ID())
		if err != nil {
			t.Fatal(err)
		}
		nodes[addr] = true
	}
	if len(nodes) < 2 {
		t.Fatalf("the threads' families are on %d node(s); want them spread", len(nodes))
	}

	cc := b.Client().(*goredis.ClusterClient)
	var killed atomic.Int64 // masters are visited at once
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
		n, err := c.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
		killed.Add(n)
		return err
	})
	if err != nil || killed.Load() == 0 {
		t.Fatalf("client kill: %d, %v", killed.Load(), err)
	}
	f.expect(t, short{thread.ChangeGap, "", 0, ""})
	want = nil
	for i, th := range ths {
		if err := th.Delete(ctx); err != nil {
			t.Fatal(err)
		}
		want = append(want, short{thread.ChangeDelete, fmt.Sprintf("t%d", i), 0, ""})
	}
	f.expectPerThread(t, want...)
	f.quiet(t)
}

// nodeOf returns the address of the node that holds a thread's record.
func nodeOf(ctx context.Context, s *redis.Store, id string) (string, error) {
	cc := s.Client().(*goredis.ClusterClient)
	fam, err := cc.Get(ctx, s.Prefix()+":t:"+id).Result()
	if err != nil {
		return "", err
	}
	slot, err := cc.ClusterKeySlot(ctx, s.Prefix()+":{"+fam+"}:m").Result()
	if err != nil {
		return "", err
	}
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return "", err
	}
	for _, r := range slots {
		if int64(r.Start) <= slot && slot <= int64(r.End) {
			return r.Nodes[0].Addr, nil
		}
	}
	return "", fmt.Errorf("no node serves slot %d", slot)
}

// expectPerThread reads len(want) changes and checks that each thread's
// come in the order of want.
func (f *feed) expectPerThread(t testing.TB, want ...short) {
	t.Helper()
	byThread := func(cs []short) map[string][]short {
		m := map[string][]short{}
		for _, c := range cs {
			m[c.Thread] = append(m[c.Thread], c)
		}
		return m
	}
	var got []short
	timeout := time.After(10 * time.Second)
	for len(got) < len(want) {
		select {
		case c := <-f.ch:
			got = append(got, short{c.Kind, c.Thread, c.Version, c.Checkpoint})
		case <-timeout:
			t.Fatalf("heard %v, want %v", got, want)
		}
	}
	g, w := byThread(got), byThread(want)
	for id, cs := range w {
		if !slices.Equal(g[id], cs) {
			t.Fatalf("thread %q: heard %v, want %v", id, g[id], cs)
		}
	}
	if len(g) != len(w) {
		t.Fatalf("heard %v, want %v", got, want)
	}
}
