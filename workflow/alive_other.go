//go:build !unix

package workflow

// processAlive cannot tell here, and says yes: the lease then runs out.
func processAlive(int) bool { return true }
