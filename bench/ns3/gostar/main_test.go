package main

import (
	"math"
	"testing"
	"time"
)

// The star's short form: every frame arrives, and the line-rate run ends
// when the sink link has carried them all (N·P frames of 308 bytes at 100
// Gb/s after the first arrival), as ns-3's does (bench/ns3/star.cc).
func TestStar(t *testing.T) {
	for _, paced := range []bool{false, true} {
		res, err := run(4, 2000, paced, 0)
		if err != nil {
			t.Fatal(err)
		}
		if res.delivered != 8000 {
			t.Errorf("paced %t: delivered %d of 8000", paced, res.delivered)
		}
		if !paced {
			// The first frame's 24.64 ns and 1 µs to the router, 8000 ×
			// 24.64 ns back to back on the sink link, and its 1 µs.
			want := time.Duration(math.Round(24.64+1000+8000*24.64+1000)) * time.Nanosecond
			if d := res.end - want; d < -30*time.Nanosecond || d > 30*time.Nanosecond {
				t.Errorf("line rate: ended at %v, want %v", res.end, want)
			}
		}
	}
}
