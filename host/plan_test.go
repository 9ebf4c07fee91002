package host

import (
	"math"
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
	// r_ina = 10/50 (10 chunks in flight of a 50-chunk bandwidth-delay
	// product), r_ps = 1 (PSCapacity and Workers unset): together more
	// than the link, so φ0 = 1 − r_ina = 0.8, p = 20·φ0/(1−φ0) = 80.
	if p.PS != 80 {
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

// TestPathControlInitialShare: the first plan splits the chunks so that both
// paths finish together at their expected rates, or, where together they
// exceed the workers' links (which both share), so that the INA path runs
// at its rate and the PS path takes the rest; a small grant puts most
// chunks on the PS path (with the former fixed bound of one half, a grant
// of a seventh of the pipe carried over half the chunks at a seventh of
// the rate: slower than no grant).
func TestPathControlInitialShare(t *testing.T) {
	for _, c := range []struct {
		pipe, n, workers int
		capacity         float64
	}{
		{145, 20, 2, 1}, {145, 20, 8, 1}, {145, 72, 4, 1}, {19, 3, 2, 1},
		{7, 1, 2, 1}, {145, 20, 2, 4}, {145, 2, 8, 0.5}, {1000, 500, 16, 1},
		{285, 200, 2, 1}, {285, 227, 4, 1}, {145, 100, 1, 1},
	} {
		pc := PathControl{PipeSlots: c.pipe, Workers: c.workers, PSCapacity: c.capacity}
		const chunks = 1 << 20
		p := pc.Plan(chunks, c.n)
		ina, ps := p.Count()
		// Each path's time at its expected rate (chunks ÷ rate, in units of
		// a worker link's chunk time), computed from the plan.
		rIna := min(1, float64(max(c.n/2, 1))/(float64(c.pipe)/2))
		rPS := c.capacity / float64(c.workers)
		tIna, tPS := float64(ina)/rIna, float64(ps)/rPS
		tol := 0.01 + 1/float64(p.PS) // p is rounded
		if rIna+rPS >= 1 {
			// The link binds: the INA path at its rate takes the whole time
			// the link needs, and the PS path is done by then.
			if d := math.Abs(tIna-chunks) / chunks; d > tol || tPS > chunks*(1+tol) {
				t.Errorf("%+v: plan %+v: INA path %.0f, PS path %.0f chunk-times, link %d", c, p, tIna, tPS, chunks)
			}
			continue
		}
		if d := math.Abs(tIna-tPS) / max(tIna, tPS); d > tol {
			t.Errorf("%+v: plan %+v: INA path %.0f, PS path %.0f chunk-times (%.1f %% apart)", c, p, tIna, tPS, 100*d)
		}
		// Finishing together beats either path alone.
		both := max(tIna, tPS)
		if both >= chunks/rPS || both >= chunks/rIna {
			t.Errorf("%+v: plan %+v: %.0f chunk-times, alone %.0f (PS) %.0f (INA)", c, p, both, chunks/rPS, chunks/rIna)
		}
	}
	// Under PathTrim the PS bounds φ at one half.
	ps, err := NewPS(PSConfig{INAPath: PathTrim})
	if err != nil {
		t.Fatal(err)
	}
	if ps.cfg.Control.PSShareMax != 0.5 {
		t.Fatalf("PathTrim: PSShareMax = %v", ps.cfg.Control.PSShareMax)
	}
	pc := PathControl{PipeSlots: 145, Workers: 2, PSShareMax: 0.5}
	if p := pc.Plan(1<<20, 20); p.PS != 20 {
		t.Fatalf("bounded φ: %+v", p)
	}
}

// TestPathControlWholeRounds: under PathUC p is the nearest multiple of n.
func TestPathControlWholeRounds(t *testing.T) {
	for _, c := range []struct {
		pipe, n, workers int
		want             int
	}{
		// r_ina = 113/142.5, r_ps = 1/4: the link binds, φ0 = 0.207, p =
		// 59 of n = 227: 0.
		{285, 227, 4, 0},
		// r_ina = 100/142.5, r_ps = 1/2: φ0 = 0.298, p = 85 of n = 200: 0
		// (a short all-reduce split into rounds of 200 + 200 took 26.2 ms
		// against 16.4 ms on the INA path alone: cmd/inabox's tiny scenario).
		{285, 200, 2, 0},
		// r_ina = 10/72.5, r_ps = 1/2: φ0 = 0.784, p = 72.5 of n = 20: 80.
		{145, 20, 2, 80},
		// φ0 = 0.973 (one chunk in flight of 72.5), p = 72.5 of n = 2: 72.
		{145, 2, 2, 72},
	} {
		pc := PathControl{PipeSlots: c.pipe, Workers: c.workers, WholeRounds: true}
		if p := pc.Plan(1<<20, c.n); p.PS != c.want {
			t.Errorf("%+v: plan %+v, want PS %d", c, p, c.want)
		}
	}
	ps, err := NewPS(PSConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if !ps.cfg.Control.WholeRounds || ps.cfg.Control.PSShareMax != 0 {
		t.Fatalf("PathUC: %+v", ps.cfg.Control)
	}
}
