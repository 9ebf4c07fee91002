package testenv

import (
	"time"

	"github.com/inabox/inabox/internal/rusage"
)

// ProcessCPU returns the process's user + system CPU time so far (every
// goroutine) and its minor page faults: what benchmarks that time a whole
// run report against its virtual time.
func ProcessCPU() (time.Duration, int64) {
	u, err := rusage.Self()
	if err != nil {
		panic(err)
	}
	return u.CPU, u.MinorFaults
}
