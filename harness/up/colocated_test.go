package up

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUpCoLocated runs a scenario whose PSs share a host with a worker
// (topology.ps.placement: co-located) as processes, under FreeINA (its PS
// allocates the switch's memory and recovers lost chunks over RC) and ATP
// (its PS receives every result and ACKs it; at zero host cost, which
// takes it from 22 s to 5 s of virtual time): each host is one process
// running its NIC, worker and PS, a loss burst named by the PS's link hits
// the host's link, and a crash of the host pauses its worker and PS. Every
// sum is exact, each PS reports from its host's process, nothing is left.
func TestUpCoLocated(t *testing.T) {
	needRoot(t)
	for _, policy := range []string{"freeina", "atp"} {
		t.Run(policy, func(t *testing.T) {
			file := "testdata/up-colocated.yaml"
			if policy == "atp" {
				b, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				file = filepath.Join(t.TempDir(), "up-colocated-costs-none.yaml")
				src := strings.Replace(string(b), "  ps: {placement: co-located}\n", "  ps: {placement: co-located}\n  costs: none\n", 1)
				if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			res, pids := upOK(t, Config{Scenario: file, Command: testCommand, Timeout: 50 * time.Second, Policy: policy})
			checkNothingLeft(t, res, pids)
			if len(res.Workers) != 4 || len(res.Jobs) != 2 {
				t.Fatalf("%d workers, %d jobs", len(res.Workers), len(res.Jobs))
			}
			for _, w := range res.Workers {
				if !w.Exact || len(w.Iterations) != 3 {
					t.Errorf("%s: exact=%v, %d iterations", w.Name, w.Exact, len(w.Iterations))
				}
			}
			// No PS process: the hosts of w1.0 and w2.0 run ps and ps1.
			if _, ok := pids["ps"]; ok || len(pids) != 5 {
				t.Errorf("processes %v, want the switch and 4 workers", pids)
			}
			if len(res.PSs) != 2 || res.PSs[0].Name != "ps" || res.PSs[1].Name != "ps1" || res.PSs[0].In != "w1.0" || res.PSs[1].In != "w2.0" ||
				res.PSs[0].Pid != pids["w1.0"] || len(res.PSReports) != 2 {
				t.Fatalf("PS results %+v", res.PSs)
			}
			if policy == "freeina" {
				for _, r := range res.PSReports {
					if r.PS == nil || r.Node == "" {
						t.Errorf("PS report %+v: no counters", r)
					}
				}
			}
			var fired []string
			for _, f := range res.Faults {
				var steps []string
				for _, st := range f.Steps {
					steps = append(steps, st.What)
					if st.Error != "" {
						t.Errorf("fault %s: step %q failed: %s", f.Kind, st.What, st.Error)
					}
				}
				fired = append(fired, f.Kind+" "+f.Target+": "+strings.Join(steps, ", "))
			}
			if got := strings.Join(fired, "; "); got != "loss_burst ps0: loss 0.2 on ps0 for 100ms; node_crash h2: stop w2.0, cont w2.0" {
				t.Errorf("faults: %s", got)
			}
		})
	}
}

// TestUpCoLocatedLoseState: a crash of a co-located host that loses its
// state restarts its process, worker, NIC and PS alike; ATP's PS cannot
// recover its open chunks, and inabox up stops with the emulator's own
// error for that PS.
func TestUpCoLocatedLoseState(t *testing.T) {
	needRoot(t)
	b, err := os.ReadFile("testdata/up-colocated.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(b), "target: h2, duration: 100ms}", "target: h2, duration: 100ms, lose_state: true}", 1)
	file := filepath.Join(t.TempDir(), "up-colocated-lose-state.yaml")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var pids map[string]int
	cfg := Config{Scenario: file, Command: testCommand, Timeout: 50 * time.Second, Policy: "atp",
		OnRunning: func(p map[string]int) { pids = p }}
	res, err := Up(context.Background(), cfg, nil, io.Discard)
	const want = "policy atp: at 500ms: ps1 restarted with its state lost: atp keeps the state of every open chunk only in its parameter server"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Up: %v; want it to say %q", err, want)
	}
	checkNothingLeft(t, res, pids)
}
