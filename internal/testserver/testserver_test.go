package testserver

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

func TestPostgresHandsOutFreshDatabases(t *testing.T) {
	a, b := Postgres(t), Postgres(t)
	if a == b {
		t.Fatalf("two calls gave the same database %s", a)
	}
	u, err := url.Parse(a)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatalf("the server does not listen at %s: %v", u.Host, err)
	}
	c.Close()
}

func TestRedisAnswers(t *testing.T) {
	a, b := Redis(t), Redis(t)
	if a == b {
		t.Fatalf("two calls gave the same database %s", a)
	}
	u, err := url.Parse(a)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	db := strings.TrimPrefix(u.Path, "/")
	fmt.Fprintf(c, "SELECT %s\r\nDBSIZE\r\n", db)
	r := bufio.NewReader(c)
	for _, want := range []string{"+OK", ":0"} {
		line, err := r.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != want {
			t.Fatalf("got %q (%v), want %q", line, err, want)
		}
	}
}
