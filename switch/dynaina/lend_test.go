package dynaina

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// gradFor returns the gradient bytes whose predicted all-reduce takes comm
// at 100 Gb/s.
func gradFor(comm time.Duration) int64 {
	return int64(comm.Seconds() * 100e9 / 8 / (336.0 / 256))
}

// reviewCase is the review's measurement: 420 slots and a demand of 282
// slots per job, so the first job gets a full pool and the second only the
// 138 slots left (an undersized pool: its all-reduces run at about half
// rate). Job 1 is compute-bound (10 ms all-reduce, 400 ms compute), job 2
// communication-intensive (50 ms, 100 ms).
func reviewCase(t *testing.T, lend bool) *Scheduler {
	t.Helper()
	s := newSchedCfg(t, Config{TotalSlots: 420, RTT: 7580 * time.Nanosecond, Lend: lend})
	if _, err := s.Register(0, JobProfile{ID: 1, Workers: 4, GradientBytes: gradFor(10 * ms), Compute: 400 * ms}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Register(0, JobProfile{ID: 2, Workers: 4, GradientBytes: gradFor(50 * ms), Compute: 100 * ms}); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, s)
	if d1, d2 := s.JobInfo(1).Demand, s.JobInfo(2).Demand; d1 != 282 || d2 != 282 {
		t.Fatalf("demands %d, %d: want 282", d1, d2)
	}
	if p := s.Pools(); len(p) != 2 || p[0].Range != (Range{0, 282}) || p[1].Range != (Range{282, 138}) {
		t.Fatalf("pools %+v: want [0,282) for job 1 and [282,420) for job 2", p)
	}
	// Job 1's first all-reduce: 0–10 ms; its next is due at 10+400 ms.
	if d, _ := s.PhaseStart(0, 1, 1); d.Action != Grant || d.Range != (Range{0, 282}) {
		t.Fatalf("job 1: %+v", d)
	}
	s.PhaseEnd(10*ms, 1)
	return s
}

// The review's case: job 2 sits in an undersized pool while job 1's full
// pool is idle. With Lend job 2 is granted job 1's whole pool and ends its
// all-reduce (and the loan) long before job 1's predicted return, when job
// 1 finds its pool free; without Lend it gets its own 138 slots, as before.
func TestLendIdlePool(t *testing.T) {
	for _, lend := range []bool{false, true} {
		s := reviewCase(t, lend)
		d, _ := s.PhaseStart(20*ms, 2, 1)
		mustCheck(t, s)
		if !lend {
			if d.Action != Grant || d.Range != (Range{282, 138}) || d.Lender != 0 || len(s.Loans()) != 0 {
				t.Fatalf("without Lend: %+v, loans %+v; want job 2's own 138 slots", d, s.Loans())
			}
			continue
		}
		pool1 := s.JobInfo(1).Pool
		if d.Action != Grant || d.Range != (Range{0, 282}) || d.Lender != pool1 {
			t.Fatalf("with Lend: %+v, want a grant of job 1's pool [0,282) lent by pool %d", d, pool1)
		}
		ln, ok := s.LoanOf(2)
		if !ok || ln.Pool != pool1 || ln.Range != d.Range || ln.At != 20*ms || ln.Return != 410*ms || len(ln.Owners) != 1 || ln.Owners[0] != 1 {
			t.Fatalf("loan %+v (%v), want pool %d [0,282) at 20ms, owner 1 back at 410ms", ln, ok, pool1)
		}
		if p := s.Pools()[0]; !p.Lent || p.Borrower != 2 || p.Loan != d.Range || p.Leased {
			t.Fatalf("lent pool %+v", p)
		}
		if s.LeasedSlots() != 282 {
			t.Errorf("leased slots %d, want the loan's 282", s.LeasedSlots())
		}
		// Job 2's all-reduce ends at 70 ms, before job 1's predicted return.
		end := 70 * ms
		if end >= ln.Return {
			t.Fatalf("test setup: the borrower ends at %v, after the owner's return %v", end, ln.Return)
		}
		if g, _ := s.PhaseEnd(end, 2); len(g) != 0 {
			t.Fatalf("loan end granted %+v: nobody waits", g)
		}
		mustCheck(t, s)
		if len(s.Loans()) != 0 || s.LeasedSlots() != 0 {
			t.Fatalf("loan not ended: %+v", s.Loans())
		}
		if b, l := s.JobInfo(2).Borrowed, s.JobInfo(1).Lent; b != 1 || l != 1 {
			t.Errorf("Borrowed %d, Lent %d: want 1, 1", b, l)
		}
		if d, _ := s.PhaseStart(410*ms, 1, 2); d.Action != Grant || d.Range != (Range{0, 282}) || d.Lender != 0 {
			t.Errorf("job 1 back at 410ms: %+v, want its own pool", d)
		}
		mustCheck(t, s)
	}
}

// An owner starting its all-reduce while its pool is lent queues for the
// loan's end and is granted its pool by it; a second time, the borrower
// runs late and the owner's wait expires into the PS path at its deadline.
func TestLendOwnerReturnsEarly(t *testing.T) {
	s := reviewCase(t, true)
	if d, _ := s.PhaseStart(20*ms, 2, 1); d.Lender == 0 {
		t.Fatalf("no loan: %+v", d)
	}
	// Job 1 comes back at 60 ms, long before its predicted 410 ms.
	d, _ := s.PhaseStart(60*ms, 1, 2)
	wantDeadline := 60*ms + time.Duration(0.5*float64(s.JobInfo(1).Comm)) + s.cfg.RTT
	if d.Action != Queue || d.Deadline != wantDeadline {
		t.Fatalf("owner of a lent pool: %+v, want queue until %v", d, wantDeadline)
	}
	mustCheck(t, s)
	g, _ := s.PhaseEnd(62*ms, 2)
	if len(g) != 1 || g[0].Job != 1 || g[0].AllReduce != 2 || g[0].Action != Grant || g[0].Range != (Range{0, 282}) || g[0].Lender != 0 {
		t.Fatalf("loan end: %+v, want job 1 granted its pool", g)
	}
	if w := s.JobInfo(1).Waited; w != 2*ms {
		t.Errorf("owner waited %v, want 2ms", w)
	}
	mustCheck(t, s)
	s.PhaseEnd(72*ms, 1)

	// Job 1's next is predicted at 72 ms + compute (≈ 355 ms): job 2 borrows
	// at 80 ms, job 1 is back at 90 ms, and job 2 is still going when job
	// 1's deadline passes.
	if d, _ := s.PhaseStart(80*ms, 2, 2); d.Lender == 0 {
		t.Fatalf("no second loan: %+v (loans %+v)", d, s.Loans())
	}
	d, _ = s.PhaseStart(90*ms, 1, 3)
	if d.Action != Queue {
		t.Fatalf("owner: %+v", d)
	}
	if x := s.Expire(d.Deadline); len(x) != 0 {
		t.Fatalf("expired at the deadline itself: %+v", x)
	}
	x := s.Expire(d.Deadline + time.Microsecond)
	if len(x) != 1 || x[0].Job != 1 || x[0].AllReduce != 3 || x[0].Action != PSPath {
		t.Fatalf("after the deadline: %+v, want job 1's all-reduce on the PS path", x)
	}
	if g, _ := s.PhaseEnd(130*ms, 2); len(g) != 0 {
		t.Fatalf("loan end after the owner gave up: %+v", g)
	}
	mustCheck(t, s)
	if in := s.JobInfo(1); in.Lent != 2 || in.Queued != 2 || in.PSPaths != 1 {
		t.Errorf("owner %+v", in)
	}
}

// No loan when an owner is due back before the borrower's all-reduce would
// end with the margin, when an owner has no measured phase yet, or when
// the idle pool is no larger than the borrower's own.
func TestLendRefused(t *testing.T) {
	// Owner due back at 410 ms; borrower's all-reduce of 50 ms needs
	// (1+0.5)·50 ms + RTT from its start: a start after 335 ms gets no loan.
	s := reviewCase(t, true)
	if d, _ := s.PhaseStart(336*ms, 2, 1); d.Lender != 0 || d.Range != (Range{282, 138}) {
		t.Errorf("start at 336ms (owner back at 410ms): %+v, want no loan", d)
	}
	if r := s.Refusals; r != (LendRefusals{Tried: 1, TooSoon: 1}) {
		t.Errorf("start at 336ms: refusals %+v, want one, too soon", r)
	}
	s = reviewCase(t, true)
	if d, _ := s.PhaseStart(334*ms, 2, 1); d.Lender == 0 {
		t.Errorf("start at 334ms: %+v, want a loan", d)
	}
	if r := s.Refusals; r != (LendRefusals{Tried: 1}) {
		t.Errorf("start at 334ms: refusals %+v, want a try and no refusal", r)
	}
	// An owner never seen ending an all-reduce.
	s = newSchedCfg(t, Config{TotalSlots: 420, RTT: 7580 * time.Nanosecond, Lend: true})
	s.Register(0, JobProfile{ID: 1, Workers: 4, GradientBytes: gradFor(10 * ms), Compute: 400 * ms})
	s.Register(0, JobProfile{ID: 2, Workers: 4, GradientBytes: gradFor(50 * ms), Compute: 100 * ms})
	if d, _ := s.PhaseStart(20*ms, 2, 1); d.Lender != 0 {
		t.Errorf("owner without a measurement: %+v, want no loan", d)
	}
	if r := s.Refusals; r != (LendRefusals{Tried: 1, Unpredicted: 1}) {
		t.Errorf("owner without a measurement: refusals %+v, want one, unpredicted", r)
	}
	// The borrower's own pool is as large as the idle one: no loan.
	s = newSchedCfg(t, Config{TotalSlots: 564, RTT: 7580 * time.Nanosecond, Lend: true})
	s.Register(0, JobProfile{ID: 1, Workers: 4, GradientBytes: gradFor(10 * ms), Compute: 400 * ms})
	s.Register(0, JobProfile{ID: 2, Workers: 4, GradientBytes: gradFor(50 * ms), Compute: 100 * ms})
	s.PhaseStart(0, 1, 1)
	s.PhaseEnd(10*ms, 1)
	if d, _ := s.PhaseStart(20*ms, 2, 1); d.Lender != 0 || d.Range != (Range{282, 282}) {
		t.Errorf("full own pool: %+v, want it, not a loan", d)
	}
	if r := s.Refusals; r != (LendRefusals{}) {
		t.Errorf("full own pool: refusals %+v, want none: an idle own pool that covers the demand is granted without trying to borrow", r)
	}
	mustCheck(t, s)
}

// A job whose pool is busy, or that has none, borrows an idle pool.
func TestLendWhenBusyOrWithoutPool(t *testing.T) {
	// Jobs 1 and 2 share a pool (memory full, low overlap); job 3 has a
	// pool of its own. Job 2 finds the shared pool held by job 1 for long:
	// without Lend the PS path, with Lend job 3's idle pool.
	for _, lend := range []bool{false, true} {
		s := newSchedCfg(t, Config{TotalSlots: 2 * 745, Lend: lend})
		s.Register(0, prof(vgg16, 3))
		s.Register(0, prof(resnet50, 1))
		s.Register(0, prof(incept, 2))
		if s.JobInfo(1).Pool != s.JobInfo(2).Pool || s.JobInfo(3).Pool == s.JobInfo(1).Pool {
			t.Fatalf("setup: %+v", s.Pools())
		}
		s.PhaseStart(0, 3, 1)
		s.PhaseEnd(60*ms, 3) // job 3 back at ≈ 485 ms
		s.PhaseStart(100*ms, 1, 1)
		d, _ := s.PhaseStart(101*ms, 2, 1)
		mustCheck(t, s)
		if want := PSPath; !lend && d.Action != want {
			t.Errorf("without Lend: %+v, want %v", d, want)
		}
		if lend && (d.Action != Grant || d.Lender != s.JobInfo(3).Pool) {
			t.Errorf("with Lend: %+v, want a loan of job 3's pool %d", d, s.JobInfo(3).Pool)
		}
	}
	// NoSharing leaves a job arriving with memory full without a pool; with
	// Lend it borrows.
	s := newSchedCfg(t, Config{TotalSlots: 745, NoSharing: true, Lend: true})
	s.Register(0, prof(resnet50, 1))
	s.Register(0, prof(incept, 2))
	if s.JobInfo(2).Pool != -1 {
		t.Fatalf("setup: %+v", s.Pools())
	}
	s.PhaseStart(0, 1, 1)
	s.PhaseEnd(11*ms, 1)
	if d, _ := s.PhaseStart(20*ms, 2, 1); d.Action != Grant || d.Range != (Range{0, 745}) || d.Lender != s.JobInfo(1).Pool {
		t.Errorf("job without a pool: %+v, want a loan of pool %d", d, s.JobInfo(1).Pool)
	}
	// The owner comes back early: with NoSharing too it queues for the loan.
	if d, _ := s.PhaseStart(25*ms, 1, 2); d.Action != Queue {
		t.Errorf("owner of a lent pool under NoSharing: %+v, want queue", d)
	}
	if g, _ := s.PhaseEnd(30*ms, 2); len(g) != 1 || g[0].Job != 1 {
		t.Errorf("loan end: %+v", g)
	}
	mustCheck(t, s)
}

// A lender's last job leaving while its pool is lent: the pool is freed
// at the loan's end, not under the borrower. A borrower leaving ends its
// loan and hands the pool to a queued owner.
func TestLendAndLeave(t *testing.T) {
	s := reviewCase(t, true)
	s.PhaseStart(20*ms, 2, 1)
	if out, _ := s.Unregister(30*ms, 1); len(out) != 0 {
		t.Fatalf("lender leaving: %+v", out)
	}
	mustCheck(t, s)
	if l := s.Loans(); len(l) != 1 || l[0].Range != (Range{0, 282}) || s.FreeSlots() != 0 {
		t.Fatalf("loan after its owner left: %+v, free %d", l, s.FreeSlots())
	}
	s.PhaseEnd(70*ms, 2)
	mustCheck(t, s)
	// The lender's pool is freed, and the borrower's undersized pool grows
	// into it.
	if p := s.Pools(); len(p) != 1 || p[0].Jobs[0] != 2 || p[0].Range != (Range{138, 282}) {
		t.Errorf("after the loan: pools %+v, want the lender's freed and job 2's pool grown to [138,420)", p)
	}

	s = reviewCase(t, true)
	s.PhaseStart(20*ms, 2, 1)
	s.PhaseStart(40*ms, 1, 2) // queued for the loan
	out, _ := s.Unregister(50*ms, 2)
	if len(out) != 1 || out[0].Job != 1 || out[0].Action != Grant || out[0].Range != (Range{0, 282}) {
		t.Fatalf("borrower leaving: %+v, want the owner granted its pool", out)
	}
	mustCheck(t, s)
}

// Random sequences of Register/PhaseStart/PhaseEnd/Expire/Unregister with
// Lend on and random ablation switches and MeasuredOverlap keep the
// invariants after every step: Check holds; every grant lies in the job's
// pool, or is a recorded loan out of another pool that was idle just
// before; no job's grant changes while its all-reduce lasts; no two grants
// overlap; a lent pool's jobs hold nothing overlapping the loan; with
// NoSharing no pool has two jobs and the only queueing is for a lent pool.
// The sequences follow the control plane's protocol: an all-reduce start of
// a job still in one ends that one first.
func TestRandomOpsWithLending(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	profiles := []JobProfile{vgg16, bert, resnet50, incept, warm, hot}
	var loans, ownerQueued, expiredOwner int
	for trial := 0; trial < 60; trial++ {
		cfg := Config{TotalSlots: 64 + rng.IntN(3000), RTT: 20 * time.Microsecond, Lend: true,
			NoSharing: rng.IntN(2) == 0, NoPriority: rng.IntN(2) == 0, MeasuredOverlap: rng.IntN(2) == 0}
		if rng.IntN(3) == 0 {
			cfg.MinSlots = 1 + rng.IntN(cfg.TotalSlots)
		}
		s := newSchedCfg(t, cfg)
		name := fmt.Sprintf("trial %d %+v", trial, cfg)
		now := time.Duration(0)
		live := map[uint16]bool{}
		inPhase := map[uint16]bool{}
		lease := map[uint16]Range{} // grants held by all-reduces in progress
		for step := 0; step < 400; step++ {
			now += time.Duration(rng.IntN(40)) * ms
			id := uint16(1 + rng.IntN(8))
			before := map[int]PoolInfo{}
			for _, p := range s.Pools() {
				before[p.ID] = p
			}
			var ds []Decision
			ended := func(id uint16) {
				delete(inPhase, id)
				delete(lease, id)
			}
			switch op := rng.IntN(6); {
			case op == 0 && !live[id]:
				if _, err := s.Register(now, prof(profiles[rng.IntN(len(profiles))], id)); err != nil {
					t.Fatal(err)
				}
				live[id] = true
			case op == 1 && live[id] && rng.IntN(3) == 0:
				out, err := s.Unregister(now, id)
				if err != nil {
					t.Fatal(err)
				}
				ds = out
				delete(live, id)
				ended(id)
			case (op == 2 || op == 5) && live[id]:
				if inPhase[id] {
					out, _ := s.PhaseEnd(now, id)
					ended(id)
					ds = append(ds, out...)
					for _, p := range s.Pools() {
						before[p.ID] = p
					}
				}
				d, err := s.PhaseStart(now, id, uint32(step))
				if err != nil {
					t.Fatal(err)
				}
				inPhase[id] = true
				ds = append(ds, d)
				if d.Action == Queue {
					if p, ok := before[s.JobInfo(id).Pool]; ok && p.Lent {
						ownerQueued++
					} else if cfg.NoSharing {
						t.Fatalf("%s step %d: NoSharing, job %d queued for a pool that is not lent: %+v", name, step, id, p)
					}
				}
			case op == 3 && live[id] && inPhase[id]:
				out, err := s.PhaseEnd(now, id)
				if err != nil {
					t.Fatal(err)
				}
				ds = out
				ended(id)
			case op == 4:
				ds = s.Expire(now)
				for _, d := range ds {
					if p, ok := before[s.JobInfo(d.Job).Pool]; ok && p.Lent {
						expiredOwner++
					}
				}
			}
			mustCheck(t, s)
			pools := map[int]PoolInfo{}
			for _, p := range s.Pools() {
				pools[p.ID] = p
				if cfg.NoSharing && len(p.Jobs) > 1 {
					t.Fatalf("%s step %d: NoSharing, pool %+v shared", name, step, p)
				}
			}
			for _, d := range ds {
				if d.Action != Grant {
					continue
				}
				if _, held := lease[d.Job]; held {
					t.Fatalf("%s step %d: job %d granted %+v while holding %+v", name, step, d.Job, d.Range, lease[d.Job])
				}
				lease[d.Job] = d.Range
				in := s.JobInfo(d.Job)
				if d.Lender == 0 {
					pr := pools[in.Pool].Range
					if in.Pool < 0 || d.Range.Base < pr.Base || d.Range.End() > pr.End() || d.Range.Slots == 0 {
						t.Fatalf("%s step %d: job %d granted %+v outside its pool %+v", name, step, d.Job, d.Range, pr)
					}
					continue
				}
				loans++
				ln, ok := s.LoanOf(d.Job)
				was, existed := before[d.Lender]
				switch {
				case !ok || ln.Pool != d.Lender || ln.Range != d.Range:
					t.Fatalf("%s step %d: job %d granted %+v from pool %d, no such loan recorded (%+v)", name, step, d.Job, d.Range, d.Lender, ln)
				case d.Lender == in.Pool:
					t.Fatalf("%s step %d: job %d borrowed its own pool", name, step, d.Job)
				case !existed || was.Leased || was.Lent:
					t.Fatalf("%s step %d: job %d borrowed pool %+v, which was not idle", name, step, d.Job, was)
				}
			}
			// Grants held are unchanged, and the scheduler agrees.
			holds := map[uint16]Range{}
			for _, p := range s.Pools() {
				if p.Leased {
					holds[p.Holder] = p.Range
				}
				if p.Lent {
					holds[p.Borrower] = p.Loan
					for _, o := range p.Jobs {
						if r, ok := lease[o]; ok && r.Base < p.Loan.End() && p.Loan.Base < r.End() {
							t.Fatalf("%s step %d: owner %d holds %+v overlapping the loan %+v", name, step, o, r, p.Loan)
						}
					}
				}
			}
			for j, r := range lease {
				if holds[j] != r {
					t.Fatalf("%s step %d: job %d's grant %+v changed during its all-reduce to %+v", name, step, j, r, holds[j])
				}
			}
			if len(holds) != len(lease) {
				t.Fatalf("%s step %d: scheduler holds %+v, granted %+v", name, step, holds, lease)
			}
		}
	}
	if loans < 50 || ownerQueued < 5 || expiredOwner < 1 {
		t.Errorf("weak test: %d loans, %d owners queued for a lent pool, %d of them expired", loans, ownerQueued, expiredOwner)
	}
	t.Logf("%d loans, %d owners queued for a lent pool, %d of them expired", loans, ownerQueued, expiredOwner)
}
