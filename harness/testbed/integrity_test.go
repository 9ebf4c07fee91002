package testbed

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
)

// corruptionCase is one corruption setting of the matrix.
type corruptionCase struct {
	name       string
	p          float64 // per-frame corruption probability, every link
	undetected bool    // past the FCS: delivered damaged
	mix        emu.Impairments
}

// corruptionCases: corruption from 0.01 % to 1 % per frame, on the wire
// (dropped by the receiving MAC) and past the FCS (delivered damaged: the
// switch and the hosts check the ICRC), alone and combined with loss,
// duplication and reordering. long adds the rates the suite skips.
func corruptionCases(long bool) []corruptionCase {
	mix := emu.Impairments{Loss: 0.01, Duplicate: 0.01, Reorder: 0.01, ReorderDelay: 3 * time.Microsecond}
	rates := []float64{0.01}
	if long {
		rates = []float64{0.0001, 0.001, 0.01}
	}
	var cs []corruptionCase
	for _, p := range rates {
		for _, und := range []bool{false, true} {
			kind := "wire"
			if und {
				kind = "past-fcs"
			}
			cs = append(cs, corruptionCase{name: fmt.Sprintf("%s-%g", kind, p), p: p, undetected: und})
			cs = append(cs, corruptionCase{name: fmt.Sprintf("%s-%g+mix", kind, p), p: p, undetected: und, mix: mix})
		}
	}
	return cs
}

// minCorrupted is the fewest damaged frames TestCorruption's cases may
// expect: none damaged then has a chance of e^-5, under 1 %.
const minCorrupted = 5

// TestCorruption: under every policy, corruption on every link — on the
// wire or past the FCS, alone or with loss, duplication and reordering,
// over seeds — every all-reduce is exact, the run ends, and the damaged
// frames are counted where they were dropped: every wire-corrupted frame
// as a bad FCS at the next port; corruption past the FCS by the ICRC
// checks (or where the damage made the frame foreign, spoofed or
// unroutable). The suite runs 1 % per frame over two seeds; INABOX_LONG=1
// adds 0.01 % and 0.1 % and four seeds.
func TestCorruption(t *testing.T) {
	fullSizeWithoutRace(t)
	t.Parallel() // a long test: it shares the cores with the others (make test)
	long := os.Getenv("INABOX_LONG") != ""
	elems, seeds := 64*300, uint64(2)
	if long {
		elems, seeds = 64*4000, 4
	}
	for _, pol := range allPolicies {
		for _, cc := range corruptionCases(long) {
			elems := elems
			if pol == "none" && cc.p < 0.001 {
				// The ring sends MTU-sized messages: a fifth of the INA
				// policies' frames for the same gradient, too few for 0.01 %
				// to damage one in every seed (23,040 frames: 2.3 expected).
				elems *= 10
			}
			for seed := uint64(1); seed <= seeds; seed++ {
				t.Run(fmt.Sprintf("%s/%s/seed%d", pol, cc.name, seed), func(t *testing.T) {
					im := cc.mix
					if cc.undetected {
						im.CorruptUndetected = cc.p
					} else {
						im.Corrupt = cc.p
					}
					spec := Spec{Seed: seed, Jobs: jobSpecs([]int{4, 3}), Impairments: im}
					c, end := runExact(t, pol, spec, 2, elems, 2*time.Second, nil)
					var corrupted, dups, sent uint64
					for _, l := range c.Net.Links() {
						for _, dir := range []emu.Dir{emu.AtoB, emu.BtoA} {
							corrupted += l.Stats(dir).Corrupted
							dups += l.Stats(dir).Duplicated
							sent += l.Stats(dir).SentPackets
						}
					}
					d := c.Drops()
					switch {
					case float64(sent)*cc.p < minCorrupted:
						// Too few frames for the check below to mean
						// anything: P(none damaged) ≈ e^-(sent·p).
						t.Fatalf("%d frames sent: at %g per frame %.1f expected damaged, fewer than %d: give the case more elements", sent, cc.p, float64(sent)*cc.p, minCorrupted)
					case corrupted == 0:
						t.Fatalf("nothing was corrupted (p %g)", cc.p)
					case !cc.undetected && (d.FCS < corrupted || d.FCS > corrupted+dups):
						// (a duplicate of a damaged frame is damaged too)
						t.Fatalf("%d frames corrupted on the wire (%d duplicated), %d dropped for a bad FCS", corrupted, dups, d.FCS)
					case cc.undetected && (d.FCS != 0 || (corrupted >= 10 && d.BadICRC == 0)):
						// (a flip in a field the ICRC masks — TTL, TOS, the
						// IPv4 and UDP checksums, FECN/BECN — is harmless)
						t.Fatalf("%d frames corrupted past the FCS: drops %+v", corrupted, d)
					}
					t.Logf("%v; %d corrupted; drops %+v", end, corrupted, d)
				})
			}
		}
	}
}
