package sw

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/inabox/inabox/switch/dynaina"
)

// gradFor returns the gradient bytes whose predicted all-reduce at 100 Gb/s
// takes comm.
func gradFor(comm time.Duration) int64 {
	return int64(comm.Seconds() * 100e9 / 8 / (336.0 / 256))
}

// newDynaControl: 100 aggregators; RTT such that every large job's demand
// is 50 (two exclusive pools fill the memory).
func newDynaControl(t *testing.T) (*DynaINAControl, *FreeINA) {
	t.Helper()
	_, f := newFreeINASwitch(t, 2, 100)
	rtt := time.Duration(50 * 2688 * 1e9 / 100e9)
	d, err := NewDynaINAControl(f, dynaina.Config{RTT: rtt, MinSlots: 20})
	if err != nil {
		t.Fatal(err)
	}
	return d, f
}

// dynaJob is a job the test's cluster manager registers at its arrival.
type dynaJob struct {
	profile    dynaina.JobProfile
	arrival    time.Duration
	allReduces int
}

// registerArrived registers, in order, the jobs of *jobs that have arrived
// by now and drops them from *jobs, as the cluster manager does.
func registerArrived(t *testing.T, d *DynaINAControl, jobs *[]dynaJob, now time.Duration) {
	t.Helper()
	rest := (*jobs)[:0]
	for _, j := range *jobs {
		if j.arrival > now {
			rest = append(rest, j)
			continue
		}
		if err := d.Register(now, j.profile, j.allReduces); err != nil {
			t.Fatal(err)
		}
	}
	*jobs = rest
}

func poolOf(t *testing.T, d *DynaINAControl, job uint16) dynaina.Range {
	t.Helper()
	id := d.JobPool(job)
	for _, p := range d.Scheduler().Pools() {
		if p.ID == id {
			return p.Range
		}
	}
	t.Fatalf("job %d has no pool (%s)", job, d)
	return dynaina.Range{}
}

func inRange(l Lease, r dynaina.Range) bool {
	return l.Slots > 0 && l.Base >= r.Base && l.Base+l.Slots <= r.End()
}

// TestDynaINAArrivalMemoryFullAndLeave: two communication-intensive jobs
// take the memory as two pools; a compute-bound job arriving with memory
// full shares a pool (low predicted overlap). Its ALLOC while the pool is
// held by a job about to finish is queued (no GRANT), and the holder's FREE
// grants it the pool. The other sharer then leaves in the middle of the
// queued job's all-reduce: the lease is untouched.
func TestDynaINAArrivalMemoryFullAndLeave(t *testing.T) {
	ms := time.Millisecond
	d, f := newDynaControl(t)
	for _, j := range []dynaJob{
		{profile: dynaina.JobProfile{ID: 1, Workers: 2, GradientBytes: gradFor(ms), Compute: ms / 10}, allReduces: 2},
		{profile: dynaina.JobProfile{ID: 2, Workers: 2, GradientBytes: gradFor(ms), Compute: ms / 10}, allReduces: 2},
	} {
		if err := d.Register(0, j.profile, j.allReduces); err != nil {
			t.Fatal(err)
		}
	}
	if g := d.Advance(0); len(g) != 0 {
		t.Fatalf("grants before any ALLOC: %+v", g)
	}
	if d.Scheduler().FreeSlots() != 0 {
		t.Fatalf("two demands of 50 should fill 100 slots: %s", d)
	}
	// job 3 arrives: memory full
	if err := d.Register(10*time.Microsecond, dynaina.JobProfile{ID: 3, Workers: 2, GradientBytes: gradFor(10 * ms), Compute: time.Second}, 0); err != nil {
		t.Fatal(err)
	}
	d.Advance(10 * time.Microsecond)
	p3 := poolOf(t, d, 3)
	var mate uint16 = 1
	if p3 != poolOf(t, d, 1) {
		mate = 2
	}
	if p3 != poolOf(t, d, mate) {
		t.Fatalf("job 3 should share a pool: %s", d)
	}
	other := 3 - mate
	g := d.Alloc(20*time.Microsecond, mate, 1, 10000, 50, false)
	if len(g) != 1 || !inRange(g[0], p3) || g[0].Job != mate {
		t.Fatalf("holder grant %+v, pool %+v", g, p3)
	}
	held := g[0]
	g = d.Alloc(20*time.Microsecond, other, 1, 10000, 50, false)
	if len(g) != 1 || !inRange(g[0], poolOf(t, d, other)) || g[0].Base < held.Base+held.Slots && held.Base < g[0].Base+g[0].Slots {
		t.Fatalf("other grant %+v overlaps %+v", g, held)
	}
	// job 3's all-reduce while its pool is held, the holder half done: queued.
	if g := d.Alloc(520*time.Microsecond, 3, 1, 10000, 50, false); len(g) != 0 {
		t.Fatalf("queued ALLOC answered: %+v", g)
	}
	if g := d.Alloc(570*time.Microsecond, 3, 1, 10000, 50, false); len(g) != 0 { // PS retransmission
		t.Fatalf("retransmitted queued ALLOC answered: %+v", g)
	}
	g = d.Free(ms, mate, 1)
	if len(g) != 1 || g[0].Job != 3 || !inRange(g[0], p3) {
		t.Fatalf("FREE of the holder should grant job 3 its pool: %+v", g)
	}
	lease3 := g[0]
	if d.Stats().Queued != 1 {
		t.Fatalf("stats %+v", d.Stats())
	}
	// The mate's next all-reduce finds the pool held for ≈10 ms: PS path.
	g = d.Alloc(ms+100*time.Microsecond, mate, 2, 10000, 50, false)
	if len(g) != 1 || g[0].Slots != 0 {
		t.Fatalf("want a zero grant (PS path), got %+v", g)
	}
	// The mate's second and last all-reduce ends (PS path: its PS sends
	// FREE all the same) and it leaves, in the middle of job 3's all-reduce
	// in the pool they share.
	if g := d.Free(ms+ms/2, mate, 2); len(g) != 0 {
		t.Fatalf("leaving made grants %+v", g)
	}
	if d.Stats().Unregistered != 1 || d.JobPool(mate) != -1 {
		t.Fatalf("job %d did not leave: %+v", mate, d.Stats())
	}
	ls := f.Leases()
	found := false
	for _, l := range ls {
		if l.Job == 3 {
			found = l.Base == lease3.Base && l.Slots == lease3.Slots
		}
	}
	if !found {
		t.Fatalf("job 3's lease changed: %+v, want %+v", ls, lease3)
	}
	if err := d.Err(); err != nil {
		t.Fatal(err)
	}
	d.Free(12*ms, 3, 1)
	if err := d.Err(); err != nil || d.Stats().Outside != 0 {
		t.Fatal(err, d.Stats())
	}
}

// TestDynaINARandomGrantsInPool: random ALLOC/FREE/time sequences over four
// jobs and little memory, without and with Lend: every grant lies in the
// job's pool or (with Lend) in the loan its all-reduce holds, no two live
// leases overlap, and the scheduler's invariants hold.
func TestDynaINARandomGrantsInPool(t *testing.T) {
	for _, lend := range []bool{false, true} {
		loans := uint64(0)
		for seed := uint64(1); seed <= 60; seed++ {
			if lend || seed <= 30 {
				loans += randomGrants(t, seed, lend)
			}
		}
		if lend && loans < 10 {
			t.Errorf("with Lend: %d loans in 60 sequences, a weak test", loans)
		}
		t.Logf("Lend %v: %d loans", lend, loans)
	}
}

func randomGrants(t *testing.T, seed uint64, lend bool) (loans uint64) {
	{
		rng := rand.New(rand.NewPCG(seed, 7))
		var jobs []dynaJob
		for id := uint16(1); id <= 4; id++ {
			comm := time.Duration(1+rng.IntN(10)) * time.Millisecond
			jobs = append(jobs, dynaJob{arrival: time.Duration(rng.IntN(3)) * time.Millisecond, allReduces: 3 + rng.IntN(4),
				profile: dynaina.JobProfile{ID: id, Workers: 2, GradientBytes: gradFor(comm), Compute: time.Duration(rng.IntN(20)) * time.Millisecond}})
		}
		sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].arrival < jobs[b].arrival })
		d, f := newDynaControl(t)
		if lend {
			var err error
			rtt := time.Duration(50 * 2688 * 1e9 / 100e9)
			if d, err = NewDynaINAControl(f, dynaina.Config{RTT: rtt, MinSlots: 20, Lend: true}); err != nil {
				t.Fatal(err)
			}
		}
		ar := map[uint16]uint16{}
		now := time.Duration(0)
		check := func(g []Lease) {
			for _, l := range g {
				if l.Slots == 0 || d.JobPool(l.Job) >= 0 && inRange(l, poolOf(t, d, l.Job)) {
					continue
				}
				if ln, ok := d.Scheduler().LoanOf(l.Job); !lend || !ok || !inRange(l, ln.Range) {
					t.Fatalf("seed %d: grant %+v to job %d outside its pool (%s) and loan %+v", seed, l, l.Job, d, ln)
				}
			}
			ls := f.Leases()
			for i := range ls {
				for k := i + 1; k < len(ls); k++ {
					a, b := ls[i], ls[k]
					if a.Base < b.Base+b.Slots && b.Base < a.Base+a.Slots {
						t.Fatalf("seed %d: leases overlap %+v %+v", seed, a, b)
					}
				}
			}
			if err := d.Err(); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		for step := 0; step < 300; step++ {
			now += time.Duration(rng.IntN(800)) * time.Microsecond
			registerArrived(t, d, &jobs, now)
			id := uint16(1 + rng.IntN(4))
			switch rng.IntN(3) {
			case 0:
				ar[id]++
				check(d.Alloc(now, id, ar[id], 5000, 50, false))
			case 1:
				if ar[id] > 0 {
					check(d.Free(now, id, ar[id]))
				}
			case 2:
				check(d.Advance(now))
			}
		}
		if d.Stats().Outside != 0 {
			t.Fatalf("seed %d: %+v", seed, d.Stats())
		}
		return d.Stats().Loans
	}
}

// TestDynaINALoanInstalled: with Lend, a job in an undersized pool (20 of
// its 50 slots) whose ALLOC finds another job's full pool idle, that job
// being predicted away for long, is granted the idle pool: the lease is
// installed over the loan, counted in Loans and not in Outside. The owner's
// ALLOC during the loan is queued and granted its pool by the borrower's
// FREE. Without Lend the job gets its own 20 slots. A grant over another
// pool without a loan is still refused and counted in Outside.
func TestDynaINALoanInstalled(t *testing.T) {
	ms := time.Millisecond
	us := time.Microsecond
	for _, lend := range []bool{false, true} {
		_, f := newFreeINASwitch(t, 2, 70)
		rtt := time.Duration(50 * 2688 * 1e9 / 100e9)
		d, err := NewDynaINAControl(f, dynaina.Config{RTT: rtt, MinSlots: 20, Lend: lend})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []dynaina.JobProfile{
			{ID: 1, Workers: 2, GradientBytes: gradFor(ms / 10), Compute: 100 * ms},
			{ID: 2, Workers: 2, GradientBytes: gradFor(ms / 2), Compute: ms},
		} {
			if err := d.Register(0, p, 0); err != nil {
				t.Fatal(err)
			}
		}
		p1, p2 := poolOf(t, d, 1), poolOf(t, d, 2)
		if p1 != (dynaina.Range{Base: 0, Slots: 50}) || p2 != (dynaina.Range{Base: 50, Slots: 20}) {
			t.Fatalf("pools %s: want [0,50) and an undersized [50,70)", d)
		}
		// Job 1's all-reduce: its next one is predicted 100 ms after its end.
		if g := d.Alloc(0, 1, 1, 5000, 50, false); len(g) != 1 || !inRange(g[0], p1) {
			t.Fatalf("job 1: %+v", g)
		}
		d.Free(100*us, 1, 1)
		g := d.Alloc(200*us, 2, 1, 5000, 50, false)
		if len(g) != 1 || g[0].Job != 2 {
			t.Fatalf("job 2: %+v", g)
		}
		if !lend {
			if !inRange(g[0], p2) || d.Stats().Loans != 0 {
				t.Fatalf("without Lend job 2 got %+v (stats %+v), want its own pool %+v", g[0], d.Stats(), p2)
			}
			continue
		}
		if g[0].Base != 0 || g[0].Slots != 50 || d.Stats().Loans != 1 || d.Stats().Outside != 0 {
			t.Fatalf("with Lend job 2 got %+v (stats %+v), want a lease over job 1's pool [0,50)", g[0], d.Stats())
		}
		if ls := f.Leases(); len(ls) != 1 || ls[0].Job != 2 || ls[0].Base != 0 || ls[0].Slots != 50 {
			t.Fatalf("lease table %+v", ls)
		}
		if g := d.Alloc(300*us, 2, 1, 5000, 50, false); len(g) != 1 || g[0].Base != 0 || g[0].Slots != 50 {
			t.Fatalf("retransmitted ALLOC of the borrower: %+v", g)
		}
		// Job 1 is back early: queued for the loan's end.
		if g := d.Alloc(400*us, 1, 2, 5000, 50, false); len(g) != 0 {
			t.Fatalf("owner's ALLOC during the loan answered: %+v", g)
		}
		g = d.Free(600*us, 2, 1)
		if len(g) != 1 || g[0].Job != 1 || !inRange(g[0], p1) {
			t.Fatalf("borrower's FREE: %+v, want job 1 granted its pool", g)
		}
		if err := d.Err(); err != nil {
			t.Fatal(err)
		}
		// A grant of job 1's pool to job 2, which holds no loan now, is
		// outside: refused.
		if l := d.Alloc(700*us, 2, 2, 5000, 50, false); len(l) != 1 || !inRange(l[0], p2) {
			t.Fatalf("job 2's next all-reduce: %+v, want its own pool (job 1 holds its pool)", l)
		}
		if _, ok := d.install(700*us, 2, 2, 5000, p1); ok {
			t.Fatal("installed a range of job 1's pool for job 2 without a loan")
		}
		d.apply(700*us, dynaina.Decision{Job: 2, AllReduce: 2, Action: dynaina.Grant, Range: p1})
		if st := d.Stats(); st.Outside != 1 || st.Loans != 1 {
			t.Fatalf("stats %+v: want the forged grant counted in Outside", st)
		}
	}
}

// TestDynaINAExactAllocAfterIdle: a lease that idles out ends its
// all-reduce for the scheduler (a lost FREE). The PS's exact re-ALLOC of
// that all-reduce then gets no lease and does not begin it again: the job
// of two all-reduces is not ended twice, so its second all-reduce still
// gets its pool.
func TestDynaINAExactAllocAfterIdle(t *testing.T) {
	ms := time.Millisecond
	d, _ := newDynaControl(t)
	if err := d.Register(0, dynaina.JobProfile{ID: 1, Workers: 2, GradientBytes: gradFor(ms), Compute: ms / 10}, 2); err != nil {
		t.Fatal(err)
	}
	d.Advance(0)
	pool := poolOf(t, d, 1)
	if g := d.Alloc(10*time.Microsecond, 1, 1, 10000, 50, false); len(g) != 1 || !inRange(g[0], pool) {
		t.Fatalf("first grant %+v, pool %+v", g, pool)
	}
	d.Advance(10 * ms) // idle for longer than LeaseIdle (2 ms): freed
	if st := d.Stats(); st.IdleFrees != 1 {
		t.Fatalf("the idle lease was not freed: %+v", st)
	}
	for i, now := range []time.Duration{10*ms + time.Microsecond, 10*ms + 60*time.Microsecond} {
		g := d.Alloc(now, 1, 1, 10000, 50, true)
		if len(g) != 1 || g[0].Slots != 0 {
			t.Fatalf("exact re-ALLOC %d of the ended all-reduce: %+v, want a zero grant", i, g)
		}
	}
	if st := d.Stats(); st.Unregistered != 0 || d.JobPool(1) == -1 {
		t.Fatalf("the job was ended twice and left: %+v", st)
	}
	if g := d.Alloc(11*ms, 1, 2, 10000, 50, false); len(g) != 1 || !inRange(g[0], pool) {
		t.Fatalf("second all-reduce's grant %+v, pool %+v", g, pool)
	}
	d.Free(12*ms, 1, 2)
	if st := d.Stats(); st.Unregistered != 1 {
		t.Fatalf("the job did not leave after its two all-reduces: %+v", st)
	}
	if err := d.Err(); err != nil {
		t.Fatal(err)
	}
}
