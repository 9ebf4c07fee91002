package host

import (
	"testing"
	"time"

	"github.com/inabox/inabox/switch/inahdr"
)

// TestPlanPartition: a plan splits every round into INA then PS chunks;
// the INA chunks of a round use distinct aggregators; workers given the
// same plan agree on every chunk (the plan is a pure function).
func TestPlanPartition(t *testing.T) {
	for _, p := range []Plan{{Chunks: 1000, INA: 7, PS: 3}, {Chunks: 50, INA: 64}, {Chunks: 100, INA: 0, PS: 0}, {Chunks: 333, INA: 1, PS: 9}} {
		ina, ps := p.Count()
		if ina+ps != p.Chunks {
			t.Fatalf("%+v: %d+%d", p, ina, ps)
		}
		copyP := p // another worker's copy, decoded from its PLAN
		r := uint32(p.INA + p.PS)
		for c := uint32(0); c < p.Chunks; c++ {
			if p.OnINA(c) != copyP.OnINA(c) {
				t.Fatal("inconsistent")
			}
			if p.INA == 0 && p.OnINA(c) {
				t.Fatal("INA chunk without memory")
			}
			if p.INA > 0 && p.PS > 0 && p.OnINA(c) != (c%r < uint32(p.INA)) {
				t.Fatalf("%+v chunk %d", p, c)
			}
		}
		if p.INA > 0 && p.PS > 0 {
			for round := uint32(0); round < 5; round++ {
				seen := map[int]bool{}
				for i := uint32(0); i < uint32(p.INA); i++ {
					s := p.Slot(round*r + i)
					if seen[s] {
						t.Fatalf("%+v: aggregator %d used twice in round %d", p, s, round)
					}
					seen[s] = true
				}
			}
		}
	}
	// The wire form (PLAN message) round-trips.
	p := Plan{Chunks: 123456, INA: 300, PS: 17}
	m := ctl(inahdr.Ctl{Op: inahdr.CtlPlan, Job: 1, AllReduce: 2, Chunks: p.Chunks, Slots: p.INA, PSChunks: p.PS})
	if got := (Plan{Chunks: getU32(m[16:]), INA: int(getU16(m[14:])), PS: int(getU32(m[8:]))}); got != p {
		t.Fatalf("PLAN round trip %+v", got)
	}
}

func getU32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
func getU16(b []byte) uint16 { return uint16(b[0])<<8 | uint16(b[1]) }

// TestPathControl: the control law's cases.
func TestPathControl(t *testing.T) {
	pc := PathControl{PipeSlots: 100}
	if p := pc.Plan(1000, 0); p.INA != 0 || p.OnINA(0) {
		t.Fatalf("no grant: %+v", p)
	}
	if p := pc.Plan(1000, 100); p.PS != 0 {
		t.Fatalf("full grant: %+v", p)
	}
	if p := pc.Plan(50, 60); p.PS != 0 {
		t.Fatalf("grant covers the all-reduce: %+v", p)
	}
	p := pc.Plan(1000, 20)
	if p.PS != 13 { // φ0 = (1-0.2)·0.5 = 0.4 → p = 20·0.4/0.6
		t.Fatalf("initial φ: %+v", p)
	}
	// The PS path was twice as slow per chunk as needed: φ moves down.
	pc.Observe(Measure{INAChunks: 600, PSChunks: 400, INASpan: time.Millisecond, PSSpan: 2 * time.Millisecond})
	if phi := pc.Phi(); phi < 0.249 || phi > 0.251 {
		t.Fatalf("φ = %v, want 0.25", phi)
	}
	pc.Observe(Measure{INAChunks: 600, PSChunks: 400, INASpan: time.Millisecond, PSSpan: time.Millisecond / 2})
	// target r_ps/(r_ina+r_ps) = 800/1400; EWMA with 0.25
	if phi := pc.Phi(); phi < 0.41 || phi > 0.42 {
		t.Fatalf("φ = %v", phi)
	}
	if p := pc.Plan(1000, 20); p.PS != 14 {
		t.Fatalf("adapted plan %+v", p)
	}
	// One idle path: no information, φ unchanged.
	before := pc.Phi()
	pc.Observe(Measure{INAChunks: 10, INASpan: time.Millisecond})
	if pc.Phi() != before {
		t.Fatal("φ moved without a PS measurement")
	}
}
