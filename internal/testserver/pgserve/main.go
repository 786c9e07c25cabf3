// Command pgserve starts a throwaway PostgreSQL server for the tests of
// loom's clients in other languages (clients/python, clients/typescript),
// which start `loom serve` on it: it prints the URLs of -n fresh, empty
// databases, one a line, and keeps the server until its standard input
// closes or it gets SIGINT or SIGTERM; then it removes the server and its
// files.
//
//	go run ./internal/testserver/pgserve -n 2
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/loomthreads/loom/internal/testserver"
)

func main() {
	n := flag.Int("n", 1, "how many fresh databases to make")
	flag.Parse()
	urls, stop, err := testserver.StartPostgres(max(*n, 1))
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgserve:", err)
		os.Exit(1)
	}
	defer stop()
	for _, u := range urls {
		fmt.Println(u)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	<-ctx.Done()
}
