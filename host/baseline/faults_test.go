package baseline

import (
	"testing"
	"time"

	"inabox/emu"
)

// TestCombinedFaults: the INA baselines with a switch reboot at 10 µs plus
// 1 % loss, 1 % duplication and 1 % reordering on every link, several
// seeds; every result exact.
func TestCombinedFaults(t *testing.T) {
	elems, seeds := 16384, uint64(4)
	if raceEnabled {
		elems, seeds = 4096, 2
	}
	for _, kind := range []string{KindSwitchML, KindATP, KindESA} {
		for seed := uint64(1); seed <= seeds; seed++ {
			sc := scenario{name: "combo", kind: kind, jobs: []int{8}, elems: elems, ars: 2, seed: seed, reboot: 10 * time.Microsecond,
				impair: emu.Impairments{Loss: 0.01, Duplicate: 0.01, Reorder: 0.01, ReorderDelay: 3 * time.Microsecond}}
			c, end := run(t, sc)
			t.Logf("%s seed %d: %v %+v", kind, seed, end, c.Totals(1))
		}
	}
}
