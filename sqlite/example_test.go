package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/sqlite"
	"github.com/loomthreads/loom/thread"
)

// Open a database file, write a thread, and read it back after reopening.
func ExampleOpen() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "loom")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "loom.db")

	st, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	db := thread.New(st, nil)
	th, err := db.Create(ctx, thread.CreateOptions{ID: "trip", Messages: []message.Message{message.User("Plan a trip to Paris")}})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := th.Append(ctx, message.Assistant("Day 1: the Louvre.")); err != nil {
		log.Fatal(err)
	}
	db.Close()

	// Through the URL registry this time.
	db, err = thread.Open(ctx, "sqlite://"+path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	th, err = db.Thread(ctx, "trip")
	if err != nil {
		log.Fatal(err)
	}
	msgs, err := th.Messages(ctx, thread.ReadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Printf("%s: %s\n", m.Role, m.Text())
	}
	fmt.Println("version", th.Version())
	// Output:
	// user: Plan a trip to Paris
	// assistant: Day 1: the Louvre.
	// version 2
}
