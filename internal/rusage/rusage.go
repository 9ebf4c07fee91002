// Package rusage reads what the process has used so far, for reports of
// what a run cost (getrusage).
package rusage

import (
	"syscall"
	"time"
)

// Usage is the process's use so far, every thread's.
type Usage struct {
	CPU         time.Duration // user + system time
	MinorFaults int64         // first touches of memory (each can cost microseconds on a VM)
}

// Self returns the calling process's usage so far.
func Self() (Usage, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return Usage{}, err
	}
	return Usage{CPU: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), MinorFaults: int64(ru.Minflt)}, nil
}
