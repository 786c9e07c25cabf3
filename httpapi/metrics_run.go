package httpapi

import (
	"time"

	"github.com/loomthreads/loom/agent"
)

// runDone records a run that began at start and ended with res, or err:
// its duration by outcome and the tokens of its model requests.
func (m *Metrics) runDone(start time.Time, res *agent.Result, err error) {
	outcome := RunCompleted
	switch {
	case err != nil:
		outcome = RunError
	case res != nil && len(res.Pending) > 0:
		outcome = RunPending
	}
	m.Run(outcome, time.Since(start))
	if res != nil {
		var model string
		if res.Response != nil {
			model = res.Response.Model
		}
		m.Tokens(model, res.Usage)
	}
}
