package dynaina

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

// Profiles in the spirit of testdata/models (V100 compute times).
var (
	vgg16    = JobProfile{Workers: 8, GradientBytes: 528 << 20, Compute: 425 * ms}
	bert     = JobProfile{Workers: 8, GradientBytes: 1279 << 20, Compute: 229 * ms}
	resnet50 = JobProfile{Workers: 8, GradientBytes: 97 << 20, Compute: 323 * ms}
	incept   = JobProfile{Workers: 8, GradientBytes: 91 << 20, Compute: 499 * ms}
)

func prof(p JobProfile, id uint16) JobProfile { p.ID = id; return p }

func newSched(t *testing.T, slots int) *Scheduler {
	t.Helper()
	s, err := New(Config{TotalSlots: slots, RTT: 20 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustCheck(t *testing.T, s *Scheduler) {
	t.Helper()
	if err := s.Check(); err != nil {
		t.Fatalf("invariant broken: %v\npools %+v", err, s.Pools())
	}
}

func TestFreeListTakeGiveMerge(t *testing.T) {
	f := newFreeList(100)
	a, _ := f.take(30)
	b, _ := f.take(30)
	c, _ := f.take(40)
	if _, ok := f.take(1); ok {
		t.Fatal("took from an empty free list")
	}
	f.give(b)
	f.give(a) // merges with b
	if len(f.r) != 1 || f.r[0] != (Range{0, 60}) {
		t.Fatalf("free %+v, want [{0 60}]", f.r)
	}
	f.give(c)
	if len(f.r) != 1 || f.r[0] != (Range{0, 100}) {
		t.Fatalf("free %+v, want one range of 100", f.r)
	}
	// Best fit: a 10-slot request takes the 10-slot hole, not the big range.
	f = newFreeList(100)
	x, _ := f.take(10)
	y, _ := f.take(50)
	_, _ = f.take(10)
	f.give(x) // holes: [0,10) and [70,100)
	if r, _ := f.take(10); r.Base != 0 {
		t.Errorf("best fit took %+v, want the 10-slot hole at 0", r)
	}
	f.give(y)
	if !f.takeAt(10, 5) || f.takeAt(10, 5) {
		t.Error("takeAt of a free run failed, or succeeded twice")
	}
}

// A random mix of operations keeps the memory tiled exactly by pools and free
// ranges, and every grant lies inside the granted job's pool.
func TestRandomOpsKeepInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	profiles := []JobProfile{vgg16, bert, resnet50, incept}
	for trial := 0; trial < 50; trial++ {
		s := newSched(t, 64+rng.IntN(4000))
		now := time.Duration(0)
		live := map[uint16]bool{}
		for step := 0; step < 300; step++ {
			now += time.Duration(rng.IntN(50)) * ms
			id := uint16(1 + rng.IntN(12))
			var ds []Decision
			switch op := rng.IntN(5); {
			case op == 0 && !live[id]:
				if _, err := s.Register(now, prof(profiles[rng.IntN(len(profiles))], id)); err != nil {
					t.Fatal(err)
				}
				live[id] = true
			case op == 1 && live[id]:
				d, err := s.Unregister(now, id)
				if err != nil {
					t.Fatal(err)
				}
				ds = d
				delete(live, id)
			case op == 2 && live[id]:
				d, err := s.PhaseStart(now, id, uint32(step))
				if err != nil {
					t.Fatal(err)
				}
				ds = []Decision{d}
			case op == 3 && live[id]:
				d, err := s.PhaseEnd(now, id)
				if err != nil {
					t.Fatal(err)
				}
				ds = d
			case op == 4:
				ds = s.Expire(now)
			}
			mustCheck(t, s)
			for _, d := range ds {
				if d.Action != Grant {
					continue
				}
				in := s.JobInfo(d.Job)
				var pr Range
				for _, p := range s.Pools() {
					if p.ID == in.Pool {
						pr = p.Range
					}
				}
				if d.Range.Base < pr.Base || d.Range.End() > pr.End() || d.Range.Slots == 0 {
					t.Fatalf("job %d granted %+v outside its pool %+v", d.Job, d.Range, pr)
				}
			}
		}
	}
}

// Communication-intensive jobs get their full demand first; a job arriving
// when memory is full shares a pool with a job whose phases rarely overlap
// with its own, or takes memory from a less intensive job.
func TestArrivalWhenMemoryFull(t *testing.T) {
	s := newSched(t, 1500)
	in1, _ := s.Register(0, prof(resnet50, 1))
	in2, _ := s.Register(0, prof(bert, 2))
	mustCheck(t, s)
	if in1.Pool < 0 || in2.Pool < 0 || in1.Pool == in2.Pool {
		t.Fatalf("first two jobs: %+v %+v, want separate pools", in1, in2)
	}
	if s.JobInfo(2).Intensity <= s.JobInfo(1).Intensity {
		t.Fatalf("BERT should be more communication-intensive than ResNet50: %+v %+v", s.JobInfo(2), s.JobInfo(1))
	}
	// Memory is now full (demand is ~700 slots each at 100 Gb/s and 20 µs).
	if s.FreeSlots() >= s.JobInfo(1).Demand {
		t.Fatalf("free %d: the test needs memory to be full", s.FreeSlots())
	}
	// A third, compute-bound job shares the pool of the other compute-bound
	// one (their all-reduces rarely overlap).
	in3, _ := s.Register(0, prof(incept, 3))
	mustCheck(t, s)
	if in3.Pool != s.JobInfo(1).Pool {
		t.Errorf("Inception placed in pool %d, want ResNet50's pool %d (low overlap); pools %+v", in3.Pool, s.JobInfo(1).Pool, s.Pools())
	}
	// VGG16 (communication-intensive) arriving now takes memory from the least
	// intensive exclusive pool rather than sharing BERT's.
	in4, _ := s.Register(0, prof(vgg16, 4))
	mustCheck(t, s)
	if in4.Pool == s.JobInfo(2).Pool {
		t.Errorf("VGG16 was put in BERT's pool: both are communication-bound; pools %+v", s.Pools())
	}
	if in4.Pool < 0 {
		t.Errorf("VGG16 got no memory; pools %+v", s.Pools())
	}
}

// Two jobs in one pool: the second all-reduce queues while the first holds
// the pool, and gets the grant when the first ends; a job too far from its
// turn goes the PS path instead.
func TestTemporalSharing(t *testing.T) {
	s := newSched(t, 800)
	s.Register(0, prof(resnet50, 1))
	s.Register(0, prof(incept, 2))
	if s.JobInfo(1).Pool != s.JobInfo(2).Pool {
		t.Fatalf("want one shared pool, got %+v", s.Pools())
	}
	d1, _ := s.PhaseStart(0, 1, 1)
	if d1.Action != Grant {
		t.Fatalf("first all-reduce: %v", d1.Action)
	}
	// Job 2 starts when job 1 is nearly done: it queues.
	c1 := s.JobInfo(1).Comm
	d2, _ := s.PhaseStart(c1-c1/10, 2, 7)
	if d2.Action != Queue {
		t.Fatalf("second all-reduce near the end of the first: %v, want queue", d2.Action)
	}
	gs, _ := s.PhaseEnd(c1, 1)
	if len(gs) != 1 || gs[0].Job != 2 || gs[0].AllReduce != 7 || gs[0].Action != Grant || gs[0].Range != d1.Range {
		t.Fatalf("grants after job 1 ended: %+v", gs)
	}
	if w := s.JobInfo(2).Waited; w != c1/10 {
		t.Errorf("job 2 waited %v, want %v", w, c1/10)
	}
	// Job 1 starts again while job 2 has just begun: too long to wait.
	d3, _ := s.PhaseStart(c1+time.Microsecond, 1, 2)
	if d3.Action != PSPath {
		t.Errorf("all-reduce that would wait a whole phase: %v, want ps-path", d3.Action)
	}
	mustCheck(t, s)
}

// A job leaving mid-all-reduce of another job in the same pool does not
// disturb the lease; the pool shrinks when the lease ends.
func TestJobLeavesDuringAnothersAllReduce(t *testing.T) {
	// Pools of at least 800 slots: the third job cannot have one of its
	// own and shares (since undersized pools grow back, 2000 slots with
	// the default minimum gave it its own, and the test skipped).
	s, err := New(Config{TotalSlots: 2000, RTT: 20 * time.Microsecond, MinSlots: 800})
	if err != nil {
		t.Fatal(err)
	}
	small := prof(resnet50, 1)
	big := prof(incept, 2)
	s.Register(0, small)
	s.Register(0, big)
	s.Register(0, prof(resnet50, 3)) // fills memory so 3 shares with someone
	mustCheck(t, s)
	pool3 := s.JobInfo(3).Pool
	var other uint16
	for _, p := range s.Pools() {
		if p.ID == pool3 {
			for _, j := range p.Jobs {
				if j != 3 {
					other = j
				}
			}
		}
	}
	if other == 0 {
		t.Fatalf("job 3 got its own pool (%+v); nothing shared to test", s.Pools())
	}
	d, _ := s.PhaseStart(ms, other, 1)
	if d.Action != Grant {
		t.Fatalf("holder: %v", d.Action)
	}
	if _, err := s.Unregister(2*ms, 3); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, s)
	for _, p := range s.Pools() {
		if p.ID == pool3 && (p.Range != d.Range || !p.Leased) {
			t.Fatalf("the leased pool changed under its holder: %+v vs grant %+v", p, d.Range)
		}
	}
	if _, err := s.PhaseEnd(3*ms, other); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, s)
}

// Leaving frees memory and free ranges merge; a job that had to share a
// pool with a contending job splits out into a pool of its own once memory
// is free.
func TestLeaveMergesAndSplits(t *testing.T) {
	// Communication-bound jobs: all-reduce ~137 ms, compute 30 ms (duty 0.8).
	hot := JobProfile{Workers: 8, GradientBytes: 1279 << 20, Compute: 30 * ms}
	s := newSched(t, 1400)
	s.Register(0, prof(hot, 1))
	s.Register(0, prof(hot, 2))
	in3, _ := s.Register(0, prof(hot, 3)) // no room: must share, though it contends
	mustCheck(t, s)
	if in3.Pool != s.JobInfo(1).Pool && in3.Pool != s.JobInfo(2).Pool {
		t.Fatalf("job 3 in pool %d; pools %+v", in3.Pool, s.Pools())
	}
	peer := uint16(1)
	if in3.Pool == s.JobInfo(2).Pool {
		peer = 2
	}
	other := 3 - peer
	if _, err := s.Unregister(0, other); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, s)
	if s.JobInfo(3).Pool == s.JobInfo(peer).Pool {
		t.Errorf("job 3 still shares with job %d after memory was freed: %+v", peer, s.Pools())
	}
	if s.Ops["split"] != 1 {
		t.Errorf("ops %+v, want one split", s.Ops)
	}
	for _, id := range []uint16{peer, 3} {
		if _, err := s.Unregister(0, id); err != nil {
			t.Fatal(err)
		}
	}
	mustCheck(t, s)
	if s.FreeSlots() != 1400 || len(s.free.r) != 1 {
		t.Errorf("after every job left: free %d in %d ranges", s.FreeSlots(), len(s.free.r))
	}
}

// Two pools of rarely-overlapping jobs merge to make room for a
// communication-bound job that cannot share with either.
func TestMergeForRoom(t *testing.T) {
	// Pools cannot shrink below 745 slots here, so taking memory from a less
	// intensive job is not an option: merging is.
	s, err := New(Config{TotalSlots: 2 * 745, RTT: 20 * time.Microsecond, MinSlots: 745})
	if err != nil {
		t.Fatal(err)
	}
	warm := JobProfile{Workers: 8, GradientBytes: 528 << 20, Compute: 130 * ms} // duty ≈ 0.3
	s.Register(0, prof(warm, 1))
	s.Register(0, prof(warm, 2))
	mustCheck(t, s)
	if len(s.Pools()) != 2 || s.FreeSlots() != 0 {
		t.Fatalf("setup: pools %+v free %d", s.Pools(), s.FreeSlots())
	}
	hot := JobProfile{Workers: 8, GradientBytes: 1279 << 20, Compute: 30 * ms} // duty ≈ 0.8
	in, _ := s.Register(0, prof(hot, 3))
	mustCheck(t, s)
	if s.Ops["merge"] != 1 || in.Pool < 0 || in.Pool == s.JobInfo(1).Pool || s.JobInfo(1).Pool != s.JobInfo(2).Pool {
		t.Errorf("pools %+v, ops %+v: want jobs 1 and 2 merged and job 3 alone", s.Pools(), s.Ops)
	}
}

// Measured phase times replace the declared ones.
func TestLearnsPhaseTimes(t *testing.T) {
	s := newSched(t, 4000)
	s.Register(0, prof(resnet50, 1))
	before := s.JobInfo(1).Comm
	now := time.Duration(0)
	for i := 0; i < 20; i++ {
		s.PhaseStart(now, 1, uint32(i))
		now += 50 * ms // much slower than line rate
		s.PhaseEnd(now, 1)
		now += 300 * ms
	}
	got := s.JobInfo(1)
	if got.Comm < 45*ms || got.Comm > 55*ms || got.Compute < 290*ms || got.Compute > 310*ms {
		t.Errorf("learned comm %v compute %v (declared comm %v), want ≈50ms and ≈300ms", got.Comm, got.Compute, before)
	}
}

func TestBadInput(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "TotalSlots = 0") {
		t.Errorf("zero memory: %v", err)
	}
	if _, err := New(Config{TotalSlots: 10, MinSlots: 20}); err == nil || !strings.Contains(err.Error(), "MinSlots = 20") {
		t.Errorf("MinSlots > TotalSlots: %v", err)
	}
	s := newSched(t, 100)
	for _, c := range []struct {
		p    JobProfile
		want string
	}{
		{JobProfile{ID: 0, Workers: 1, GradientBytes: 1}, "ID 0"},
		{JobProfile{ID: 1, Workers: 0, GradientBytes: 1}, "Workers = 0"},
		{JobProfile{ID: 1, Workers: 2, GradientBytes: 0}, "GradientBytes = 0"},
		{JobProfile{ID: 1, Workers: 2, GradientBytes: 1, Compute: -1}, "Compute = -1ns"},
	} {
		if _, err := s.Register(0, c.p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.p, err, c.want)
		}
	}
	if _, err := s.PhaseStart(0, 9, 1); err != ErrUnknownJob {
		t.Errorf("unknown job: %v", err)
	}
}
