package testbed

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// crashCase is one node crash of the matrix: which node, when (a fraction
// of the clean run's first all-reduces), for how long, and whether it
// keeps its state (emu Resume) or loses it (emu Restart: Reset).
type crashCase struct {
	name string
	node func(c *Testbed) string
	// at returns the crash time from the clean run's first worker's
	// all-reduce spans.
	at   func(start, end []time.Duration) time.Duration
	down time.Duration
}

func crashCases() []crashCase {
	worker := func(c *Testbed) string { return c.Workers[0][1].Name }
	mid := func(start, end []time.Duration) time.Duration { return start[1] + (end[1]-start[1])/2 }
	return []crashCase{
		// between all-reduces 1 and 2 (the compute gap)
		{"worker-in-compute", worker, func(start, end []time.Duration) time.Duration { return end[0] + (start[1]-end[0])/2 }, 10 * time.Microsecond},
		{"worker-mid-allreduce", worker, mid, 10 * time.Microsecond},
		{"ps-mid-allreduce", func(c *Testbed) string { return c.PSs[0].Name }, mid, 10 * time.Microsecond},
		{"switch-mid-allreduce", func(c *Testbed) string { return SwitchNode }, mid, 10 * time.Microsecond},
	}
}

// crashOutcome is what a crash must end in: "exact", or an error naming
// the node (its text contains want).
func crashOutcome(policy, cse string, stateLoss bool) (exact bool, want string) {
	if !stateLoss || cse == "switch-mid-allreduce" {
		return true, "" // a paused node, or a switch reboot: every policy recovers
	}
	switch {
	case strings.HasPrefix(cse, "worker") && (policy == "atp" || policy == "esa"):
		return true, "" // the worker rejoins: the PS keeps every result
	case cse == "ps-mid-allreduce" && (policy == "switchml" || policy == "none"):
		return true, "" // their PS idles
	case strings.HasPrefix(cse, "worker"):
		return false, "w1.1 restarted with its state lost"
	}
	return false, "ps restarted with its state lost"
}

// TestCrashRecovery is the crash matrix: under every policy, a worker
// crashing in its compute phase and in the middle of an all-reduce, the PS
// and the switch crashing mid-all-reduce, each for 10 µs, paused (state
// kept, timers lost) and with its state lost. Every run ends: exact, or
// stopped at once with an error that names the node and why the policy
// cannot recover it (docs/integrity.md lists which is which).
func TestCrashRecovery(t *testing.T) {
	fullSizeWithoutRace(t)
	t.Parallel() // a long test: it shares the cores with the others (make test)
	elems := 64 * 300
	spec := Spec{Seed: 21, Jobs: []JobSpec{{Workers: 4, Compute: 40 * time.Microsecond}, {Workers: 2, Compute: 25 * time.Microsecond}}}
	for _, pol := range allPolicies {
		clean, _ := runExact(t, pol, spec, 3, elems, 2*time.Second, nil)
		var start, end []time.Duration
		for _, r := range clean.Workers[0][0].Endpoint.Reports() {
			start, end = append(start, r.Start), append(end, r.End)
		}
		for _, cc := range crashCases() {
			for _, lose := range []bool{false, true} {
				mode := "paused"
				if lose {
					mode = "state-lost"
				}
				t.Run(fmt.Sprintf("%s/%s/%s", pol, cc.name, mode), func(t *testing.T) {
					exact, want := crashOutcome(pol, cc.name, lose)
					crash := func(c *Testbed) {
						node, at := cc.node(c), cc.at(start, end)
						if err := c.Net.Crash(at, node); err != nil {
							t.Fatal(err)
						}
						restart := c.Net.Resume
						if lose {
							restart = c.Net.Restart
						}
						if err := restart(at+cc.down, node); err != nil {
							t.Fatal(err)
						}
					}
					if exact {
						c, e := runExact(t, pol, spec, 3, elems, 2*time.Second, crash)
						t.Logf("exact, end %v (drops %+v)", e, c.Drops())
						return
					}
					inputs := map[[3]int][]float32{}
					c, err := BuildWith(spec, newPolicy(pol), tensors(inputs, 3, elems, func(job uint16, rank, a int) []float32 {
						return gradient(job, rank, elems, uint64(a)+spec.Seed*100, 2)
					}))
					if err != nil {
						t.Fatal(err)
					}
					crash(c)
					at, restartAt := cc.at(start, end), cc.at(start, end)+cc.down
					_, err = c.Run(2*time.Second, 0)
					switch {
					case err == nil:
						t.Fatalf("finished; want the error %q", want)
					case !strings.Contains(err.Error(), want):
						t.Fatalf("error %q, want one naming %q", err, want)
					case c.Net.Now() > restartAt+time.Millisecond:
						t.Fatalf("stopped at %v, %v after the restart at %v: not at once", c.Net.Now(), c.Net.Now()-restartAt, restartAt)
					}
					t.Logf("crash at %v: %v (stopped at %v)", at, err, c.Net.Now())
				})
			}
		}
	}
}
