// Command leftovers fails if a server or folder that the tests recorded
// (see testserver.RecordEnv) outlived them: `make test` runs the tests with
// $LOOM_TESTSERVERS set to a fresh directory and then
//
//	go run ./internal/testserver/leftovers DIR
//
// which names each process still running and each folder still on disk,
// ends and removes them so the machine is left clean, and exits 1.
package main

import (
	"fmt"
	"os"
	"syscall"

	"github.com/loomthreads/loom/internal/testserver"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: leftovers DIR")
		os.Exit(2)
	}
	left, n, err := testserver.Leftovers(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "leftovers:", err)
		os.Exit(1)
	}
	if len(left) == 0 {
		fmt.Printf("leftovers: none of the %d servers and folders the tests recorded outlived them\n", n)
		return
	}
	for _, r := range left {
		fmt.Fprintf(os.Stderr, "leftovers: %s outlived the tests; ending it\n", r)
		if r.PID != 0 {
			syscall.Kill(r.PID, syscall.SIGKILL)
		}
		if r.Dir != "" {
			os.RemoveAll(r.Dir)
		}
	}
	fmt.Fprintf(os.Stderr, "leftovers: %d of the %d servers and folders the tests recorded outlived them\n", len(left), n)
	os.Exit(1)
}
