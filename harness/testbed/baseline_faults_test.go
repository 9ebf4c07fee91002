package testbed

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/rdma"
)

// TestBaselineCombinedFaults: the INA baselines with a switch reboot at 10 µs plus
// 1 % loss, 1 % duplication and 1 % reordering on every link, several
// seeds; every result exact.
func TestBaselineCombinedFaults(t *testing.T) {
	elems, seeds := 16384, uint64(4)
	if raceEnabled {
		elems, seeds = 4096, 2
	}
	for _, kind := range []string{"switchml", "atp", "esa"} {
		for seed := uint64(1); seed <= seeds; seed++ {
			sc := bscenario{name: "combo", kind: kind, jobs: []int{8}, elems: elems, ars: 2, seed: seed, reboot: 10 * time.Microsecond,
				impair: emu.Impairments{Loss: 0.01, Duplicate: 0.01, Reorder: 0.01, ReorderDelay: 3 * time.Microsecond}}
			c, end := run(t, sc)
			t.Logf("%s seed %d: %v %+v", kind, seed, end, c.Totals(0))
		}
	}
}

// TestBaselines100MBFaults is the full-size acceptance for every
// baseline: 8 workers all-reduce a 100 MB tensor at 100 Gb/s, exact under 1%
// and 5% loss, duplication, reordering and a switch reboot mid-all-reduce.
// It takes minutes, so it runs with INABOX_LONG=1 (make soak); the suite runs
// the same matrix on small tensors (TestBaselineAcceptance).
func TestBaselines100MBFaults(t *testing.T) {
	if os.Getenv("INABOX_LONG") == "" || raceEnabled {
		t.Skip("100 MB fault matrix: set INABOX_LONG=1 (without -race)")
	}
	elems := 100 << 20 / 4
	for _, kind := range baselineKinds {
		for _, v := range []struct {
			name   string
			impair emu.Impairments
			reboot bool
		}{
			{"clean", emu.Impairments{}, false},
			{"loss1", emu.Impairments{Loss: 0.01}, false},
			{"loss5", emu.Impairments{Loss: 0.05}, false},
			{"dup", emu.Impairments{Duplicate: 0.02}, false},
			{"reorder", emu.Impairments{Reorder: 0.02, ReorderDelay: 3 * time.Microsecond}, false},
			{"reboot", emu.Impairments{}, true},
		} {
			t.Run(kind+"/"+v.name, func(t *testing.T) {
				sc := bscenario{name: v.name, kind: kind, jobs: []int{8}, elems: elems, ars: 1, impair: v.impair, deadline: 60 * time.Second}
				if v.reboot {
					// Mid-all-reduce: a third of the clean time of the
					// fastest kinds (ATP/SwitchML need ~12 ms for 100 MB).
					sc.reboot = 4 * time.Millisecond
				}
				c, end := run(t, sc)
				t.Logf("%s 100 MB %s: %v; %s", kind, v.name, end, netSummary(c))
			})
		}
	}
}

// netSummary counts queue drops on every link and, for the RC kinds (ps,
// none), local ACK timeouts, go-back-N restarts and retransmitted packets
// over every QP.
func netSummary(c *Testbed) string {
	var drops uint64
	for _, l := range c.Net.Links() {
		drops += l.Stats(emu.AtoB).Drops.Queue + l.Stats(emu.BtoA).Drops.Queue
	}
	var tmo, gbn, retx uint64
	var nodes []any
	for _, ps := range c.PSs {
		nodes = append(nodes, ps.Node)
	}
	for _, ws := range c.Workers {
		for _, w := range ws {
			nodes = append(nodes, w.Endpoint)
		}
	}
	for _, n := range nodes {
		if q, ok := n.(interface{ QPs() []*rdma.QP }); ok {
			for _, qp := range q.QPs() {
				st := qp.Stats()
				tmo, gbn, retx = tmo+st.Timeouts, gbn+st.GoBackN, retx+st.TxRetransmits
			}
		}
	}
	return fmt.Sprintf("queue drops %d, RC timeouts %d, go-back-N %d, retransmitted packets %d", drops, tmo, gbn, retx)
}
