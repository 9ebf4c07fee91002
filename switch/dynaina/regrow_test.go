package dynaina

import (
	"testing"
	"time"
)

// An undersized pool (the MinSlots rule: the 227 slots left next to a full
// pool of 285) grows back to its demand when its neighbour's memory frees,
// here into the free memory before it; while its job's all-reduce holds
// it, it waits for the end of that all-reduce.
func TestUndersizedPoolGrowsBack(t *testing.T) {
	for _, held := range []bool{false, true} {
		s := newSchedCfg(t, Config{TotalSlots: 512, RTT: 7647 * time.Nanosecond})
		s.Register(0, prof(vgg16, 1))
		s.Register(0, prof(bert, 2))
		if p := s.Pools(); len(p) != 2 || p[1].Range != (Range{285, 227}) || s.JobInfo(2).Demand != 285 {
			t.Fatalf("setup: %+v", p)
		}
		if held {
			s.PhaseStart(0, 2, 1)
		}
		s.Unregister(ms, 1)
		mustCheck(t, s)
		want := Range{227, 285}
		if held {
			if p := s.Pools(); p[0].Range != (Range{285, 227}) {
				t.Fatalf("a held pool changed: %+v", p)
			}
			s.PhaseEnd(2*ms, 2)
			mustCheck(t, s)
		}
		if p := s.Pools(); len(p) != 1 || p[0].Range != want || s.Ops["grow"] != 1 {
			t.Errorf("held=%v: pools %+v ops %v, want job 2's pool grown to %+v", held, p, s.Ops, want)
		}
	}
}

// An undersized pool with no free memory next to it moves to a free range
// of its demand when one frees elsewhere (when idle).
func TestUndersizedPoolMoves(t *testing.T) {
	s := newSchedCfg(t, Config{TotalSlots: 2*285 + 100, RTT: 7647 * time.Nanosecond})
	s.Register(0, prof(vgg16, 1))
	s.Register(0, prof(bert, 2))
	s.Register(0, prof(hot, 3))
	if p := s.Pools(); len(p) != 3 || p[2].Range != (Range{570, 100}) {
		t.Fatalf("setup: %+v", p)
	}
	s.PhaseStart(0, 3, 1)
	s.Unregister(ms, 1)
	mustCheck(t, s)
	if p := s.Pools(); p[1].Range != (Range{570, 100}) {
		t.Fatalf("a held pool moved: %+v", p)
	}
	s.PhaseEnd(2*ms, 3)
	mustCheck(t, s)
	if p := s.Pools(); len(p) != 2 || p[1].Range != (Range{0, 285}) || s.Ops["move"] != 1 || s.FreeSlots() != 100 {
		t.Errorf("pools %+v ops %v free %d, want job 3's pool moved to [0,285)", p, s.Ops, s.FreeSlots())
	}
	// A larger free range elsewhere, if still short of the demand, is taken
	// too; a smaller one is not.
	small := func(id uint16, slots int64) JobProfile { // demand: its chunks
		return JobProfile{ID: id, Workers: 4, GradientBytes: slots * 256, Compute: ms}
	}
	s = newSchedCfg(t, Config{TotalSlots: 150 + 285 + 100, RTT: 7647 * time.Nanosecond})
	s.Register(0, small(1, 150))
	s.Register(0, prof(bert, 2))
	s.Register(0, prof(hot, 3))
	if p := s.Pools(); len(p) != 3 || p[2].Range != (Range{435, 100}) {
		t.Fatalf("setup: %+v", p)
	}
	s.Unregister(ms, 1)
	mustCheck(t, s)
	if p := s.Pools(); p[1].Range != (Range{0, 150}) || s.Ops["move"] != 1 {
		t.Errorf("pools %+v ops %v, want job 3's pool moved to the 150 free slots", p, s.Ops)
	}
	s = newSchedCfg(t, Config{TotalSlots: 90 + 285 + 225, RTT: 7647 * time.Nanosecond})
	s.Register(0, small(1, 90))
	s.Register(0, prof(bert, 2))
	s.Register(0, prof(hot, 3))
	if p := s.Pools(); len(p) != 3 || p[2].Range != (Range{375, 225}) {
		t.Fatalf("setup: %+v", p)
	}
	s.Unregister(ms, 1) // 90 free slots elsewhere: fewer than the pool's 225
	mustCheck(t, s)
	if p := s.Pools(); p[1].Range != (Range{375, 225}) || s.Ops["move"] != 0 || s.Ops["grow"] != 0 {
		t.Errorf("pools %+v ops %v, want job 3's pool unchanged", p, s.Ops)
	}
	s.Unregister(ms, 2) // [0,375) free next to it: grows down to its demand
	mustCheck(t, s)
	if p := s.Pools(); len(p) != 1 || p[0].Range != (Range{315, 285}) || s.Ops["grow"] != 1 {
		t.Errorf("pools %+v ops %v, want job 3's pool grown to [315,600)", p, s.Ops)
	}
}
