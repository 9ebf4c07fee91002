package dynaina

import (
	"testing"
	"time"
)

func newSchedCfg(t *testing.T, cfg Config) *Scheduler {
	t.Helper()
	if cfg.RTT == 0 {
		cfg.RTT = 20 * time.Microsecond
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Duty ≈ 0.3 and ≈ 0.8: a hot job cannot share a warm job's pool under the
// strict sharing rule (overlap 0.24 > 0.15).
var (
	warm = JobProfile{Workers: 8, GradientBytes: 528 << 20, Compute: 130 * ms}
	hot  = JobProfile{Workers: 8, GradientBytes: 1279 << 20, Compute: 30 * ms}
)

// NoSharing: a job arriving with memory full gets no pool (PS path) instead
// of sharing one, and a job never queues.
func TestNoSharing(t *testing.T) {
	for _, noSharing := range []bool{false, true} {
		s := newSchedCfg(t, Config{TotalSlots: 1500, NoSharing: noSharing})
		s.Register(0, prof(resnet50, 1))
		s.Register(0, prof(bert, 2))
		in3, _ := s.Register(0, prof(incept, 3))
		mustCheck(t, s)
		shared := in3.Pool == s.JobInfo(1).Pool
		if shared == noSharing {
			t.Errorf("NoSharing=%v: Inception in pool %d, ResNet50 in pool %d; pools %+v", noSharing, in3.Pool, s.JobInfo(1).Pool, s.Pools())
		}
		if noSharing {
			if in3.Pool != -1 {
				t.Errorf("NoSharing: Inception got pool %d with memory full; pools %+v", in3.Pool, s.Pools())
			}
			if d, _ := s.PhaseStart(0, 3, 1); d.Action != PSPath {
				t.Errorf("NoSharing: all-reduce of a job without a pool: %v, want ps-path", d.Action)
			}
			for _, p := range s.Pools() {
				if len(p.Jobs) > 1 {
					t.Errorf("NoSharing: pool %+v has several jobs", p)
				}
			}
		}
	}
}

// NoPriority: memory is not taken from a less intensive job for a more
// intensive one (which shares instead), queued all-reduces are granted
// first come first served, and memory freed goes to the job that arrived
// first, not to the most intensive.
func TestNoPriority(t *testing.T) {
	for _, noPrio := range []bool{false, true} {
		s := newSchedCfg(t, Config{TotalSlots: 1490, NoPriority: noPrio})
		s.Register(0, prof(warm, 1))
		s.Register(0, prof(hot, 2))
		in3, _ := s.Register(0, prof(hot, 3))
		mustCheck(t, s)
		if shrunk := s.Ops["shrink"] == 1 && in3.Pool != s.JobInfo(1).Pool; shrunk == noPrio {
			t.Errorf("NoPriority=%v: ops %v, pools %+v", noPrio, s.Ops, s.Pools())
		}
		if noPrio && in3.Pool != s.JobInfo(1).Pool {
			t.Errorf("NoPriority: the hot job should share the warm job's pool (least contended): pools %+v", s.Pools())
		}
	}

	// Grant order of queued all-reduces.
	for _, noPrio := range []bool{false, true} {
		s := newSchedCfg(t, Config{TotalSlots: 745, NoPriority: noPrio})
		s.Register(0, prof(resnet50, 1))
		s.Register(0, prof(incept, 2))
		s.Register(0, prof(vgg16, 3))
		if a, b, c := s.JobInfo(1).Pool, s.JobInfo(2).Pool, s.JobInfo(3).Pool; a != b || a != c {
			t.Fatalf("want one pool of three jobs: %+v", s.Pools())
		}
		s.PhaseStart(0, 1, 1)
		if d, _ := s.PhaseStart(8*ms, 2, 1); d.Action != Queue {
			t.Fatalf("job 2: %v", d.Action)
		}
		if d, _ := s.PhaseStart(9*ms, 3, 1); d.Action != Queue {
			t.Fatalf("job 3: %v", d.Action)
		}
		gs, _ := s.PhaseEnd(11*ms, 1)
		want := uint16(3) // VGG16 is the more intensive
		if noPrio {
			want = 2 // queued first
		}
		if len(gs) != 1 || gs[0].Job != want {
			t.Errorf("NoPriority=%v: grants %+v, want job %d", noPrio, gs, want)
		}
		mustCheck(t, s)
	}

	// Memory freed goes to the most intensive job without a pool, or with
	// NoPriority to the one that arrived first.
	for _, noPrio := range []bool{false, true} {
		s := newSchedCfg(t, Config{TotalSlots: 745, MinSlots: 745, NoSharing: true, NoPriority: noPrio})
		s.Register(0, prof(resnet50, 1))
		s.Register(0, prof(vgg16, 2))
		s.Register(0, prof(bert, 3))
		if s.JobInfo(2).Pool != -1 || s.JobInfo(3).Pool != -1 {
			t.Fatalf("setup: %+v", s.Pools())
		}
		s.Unregister(ms, 1)
		mustCheck(t, s)
		got, want := s.JobInfo(3).Pool >= 0, !noPrio
		if got != want || (s.JobInfo(2).Pool >= 0) == want {
			t.Errorf("NoPriority=%v: VGG16 pool %d, BERT pool %d", noPrio, s.JobInfo(2).Pool, s.JobInfo(3).Pool)
		}
	}
}
