//go:build !unix

package cputime

import "time"

// Available reports whether Process measures anything here.
const Available = false

func process() time.Duration { return 0 }
