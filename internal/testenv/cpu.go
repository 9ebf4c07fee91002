package testenv

import (
	"syscall"
	"time"
)

// ProcessCPU returns the process's user + system CPU time so far (every
// goroutine) and its minor page faults: what benchmarks that time a whole
// run report against its virtual time.
func ProcessCPU() (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), int64(ru.Minflt)
}
