package dynaina

import (
	"slices"
	"testing"
	"time"
)

// Two identical jobs registered at the same instant, whose all-reduces
// start at the same instants (phase-locked), share a pool: the predictor,
// which assumes independent phases, gives them an overlap of 0.001, but
// every all-reduce of the second finds the first in its all-reduce and
// takes the PS path. Without MeasuredOverlap they go on sharing even when
// memory frees (the second stays on the PS path next to 795 free slots);
// with it they are phase-locked after LockAfter collisions and split into
// separate pools as soon as memory allows, where both are granted.
func TestPhaseLockedJobs(t *testing.T) {
	const (
		comm    = 10 * ms
		compute = 323 * ms
	)
	for _, measured := range []bool{false, true} {
		s := newSchedCfg(t, Config{TotalSlots: 2*745 + 50, MeasuredOverlap: measured})
		s.Register(0, prof(vgg16, 3))
		s.Register(0, prof(resnet50, 1))
		s.Register(0, prof(resnet50, 2))
		mustCheck(t, s)
		if s.JobInfo(1).Pool != s.JobInfo(2).Pool || s.FreeSlots() != 50 {
			t.Fatalf("setup: %+v, free %d", s.Pools(), s.FreeSlots())
		}
		p := s.jobs[2].pool
		predicted := overlap(withoutJob(p, s.jobs[2]), s.jobs[2])
		if predicted > 0.002 {
			t.Fatalf("predicted overlap %v, want ≈ 0.001", predicted)
		}
		now := time.Duration(0)
		iterate := func(n int) (granted2 int) {
			for i := 0; i < n; i++ {
				for _, id := range []uint16{1, 2} {
					d, _ := s.PhaseStart(now, id, uint32(i))
					if id == 2 && d.Action == Grant {
						granted2++
					}
				}
				now += comm
				s.PhaseEnd(now, 1)
				s.PhaseEnd(now, 2)
				mustCheck(t, s)
				now += compute
			}
			return granted2
		}
		if g := iterate(6); g != 0 {
			t.Fatalf("MeasuredOverlap=%v: job 2 granted %d of 6 phase-locked all-reduces, want 0", measured, g)
		}
		in := s.JobInfo(2)
		if in.Collisions != 6 || in.PSPaths != 6 || s.JobInfo(1).Collisions != 0 {
			t.Errorf("MeasuredOverlap=%v: job 2 %+v: want 6 collisions, 6 PS paths (predicted overlap %.4f)", measured, in, predicted)
		}
		if locked := slices.Equal(in.PhaseLocked, []uint16{1}) && slices.Equal(s.JobInfo(1).PhaseLocked, []uint16{2}); locked != measured {
			t.Errorf("MeasuredOverlap=%v: phase-locked %v / %v", measured, in.PhaseLocked, s.JobInfo(1).PhaseLocked)
		}
		// Memory frees.
		s.Unregister(now, 3)
		mustCheck(t, s)
		apart := s.JobInfo(1).Pool != s.JobInfo(2).Pool
		if apart != measured {
			t.Fatalf("MeasuredOverlap=%v: after memory freed, pools %+v (free %d)", measured, s.Pools(), s.FreeSlots())
		}
		g := iterate(4)
		if measured && (g != 4 || s.JobInfo(2).Collisions != 6) {
			t.Errorf("split: job 2 granted %d of 4, collisions %d; pools %+v", g, s.JobInfo(2).Collisions, s.Pools())
		}
		if !measured && (g != 0 || s.FreeSlots() != 745+50) {
			t.Errorf("without MeasuredOverlap: job 2 granted %d of 4, free %d", g, s.FreeSlots())
		}
	}
}

// Independent jobs sharing a pool are not locked by chance collisions: a
// lock needs LockAfter consecutive ones; and a lock is forgotten when
// either job leaves.
func TestPhaseLockNeedsConsecutiveCollisions(t *testing.T) {
	s := newSchedCfg(t, Config{TotalSlots: 745 + 50, MeasuredOverlap: true, LockAfter: 3})
	s.Register(0, prof(resnet50, 1))
	s.Register(0, prof(incept, 2))
	now := time.Duration(0)
	// Job 2 starts inside job 1's all-reduce twice, then once outside, then
	// twice inside again: never 3 in a row.
	for i, inside := range []bool{true, true, false, true, true} {
		s.PhaseStart(now, 1, uint32(i))
		if inside {
			s.PhaseStart(now+ms, 2, uint32(i))
			s.PhaseEnd(now+11*ms, 1)
			s.PhaseEnd(now+12*ms, 2)
		} else {
			s.PhaseEnd(now+11*ms, 1)
			s.PhaseStart(now+12*ms, 2, uint32(i))
			s.PhaseEnd(now+22*ms, 2)
		}
		mustCheck(t, s)
		now += 400 * ms
	}
	if in := s.JobInfo(2); in.Collisions != 4 || len(in.PhaseLocked) != 0 {
		t.Fatalf("job 2 %+v: want 4 collisions, no lock", in)
	}
	s.PhaseStart(now, 1, 9)
	s.PhaseStart(now+ms, 2, 9)
	if in := s.JobInfo(2); in.Collisions != 5 || !slices.Equal(in.PhaseLocked, []uint16{1}) {
		t.Fatalf("job 2 %+v: want locked with job 1 after 3 in a row", in)
	}
	s.Unregister(now+2*ms, 1)
	s.Register(now+2*ms, prof(resnet50, 1))
	if l := s.JobInfo(2).PhaseLocked; len(l) != 0 {
		t.Errorf("lock survived job 1's departure: %v", l)
	}
	mustCheck(t, s)
}
