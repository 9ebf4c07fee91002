package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startCPUProfile starts writing a CPU profile of this process (pprof
// format) to file, for `cmd --cpuprofile file`, and returns what stops it
// and closes the file; with file "" it does nothing. The profile is how
// cmd/inabox/default.pgo is made (scripts/pgo.sh), and what a user reads
// with `go tool pprof` to see where their scenario's time goes.
func startCPUProfile(cmd, file string) (stop func() error, err error) {
	if file == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(file)
	if err != nil {
		return nil, fmt.Errorf("%s: --cpuprofile %s: %w", cmd, file, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: --cpuprofile %s: %w", cmd, file, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("%s: --cpuprofile %s: %w", cmd, file, err)
		}
		return nil
	}, nil
}
