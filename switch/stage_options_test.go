package sw

import (
	"errors"
	"strings"
	"testing"

	"github.com/inabox/inabox/switch/inahdr"
)

// psAck is job's PS acknowledging chunk (ar, chunk) with vals (ATP's ACK:
// FlagFromPS|FlagResult), from the PS's MAC (port 40 by inPortOf).
func psAck(job, ar uint16, chunk uint32, vals []int32) []byte {
	a := workerPkt(job, ar, chunk, 0, vals)
	a.srcMAC = mac(100)
	a.qp = qpFor(job, 0xFF)
	a.meta.Flags = inahdr.FlagFromPS | inahdr.FlagResult
	a.meta.Bitmap = 0
	return a.build()
}

// TestReclaimHeld: with JobSpec.ReclaimHeld (and only with it) a
// contribution reclaims an aggregator held for another job's PS ACK, even
// the aggregator of a higher-priority job; a retransmission never does; the
// held job's late ACK neither frees nor changes the new occupant, which
// completes with its own exact sum.
func TestReclaimHeld(t *testing.T) {
	for _, reclaim := range []bool{false, true} {
		s := newTestSwitch(t, 16)
		s.SetPool(1, 0, 1, 1) // one aggregator shared by two jobs
		// Job 1 (priority 5, PS on port 40) and job 2 (priority 1, PS on
		// port 40 too: inPortOf maps the PS MAC there).
		installJob(t, s, 1, 2, StagePreemptive, 1, 5, 40)
		installJob(t, s, 2, 2, StagePreemptive, 1, 1, 40)
		for _, js := range []JobSpec{
			{ID: 1, Mask: 3, Group: 1, PSPort: 40, ResultToPS: true, Priority: 5, PolicyID: StagePreemptive, PoolID: 1},
			{ID: 2, Mask: 3, Group: 2, PSPort: 40, ResultToPS: true, Priority: 1, PolicyID: StagePreemptive, PoolID: 1, ReclaimHeld: reclaim},
		} {
			if err := s.SetJob(js); err != nil {
				t.Fatal(err)
			}
		}
		o := run(s, workerPkt(1, 1, 0, 0, []int32{1, 2}).build(), workerPkt(1, 1, 0, 1, []int32{10, 20}).build())
		if len(o) != 1 || o[0].why != ReasonResult || s.Slot(0).State != StateHeld {
			t.Fatalf("reclaim %v: job 1's result %+v, slot %+v", reclaim, o, s.Slot(0))
		}
		// A retransmission of job 2 finds the held aggregator: it collides
		// with or without the option.
		re := workerPkt(2, 7, 3, 0, []int32{100, 200})
		re.meta.Flags = inahdr.FlagResend
		if o := run(s, re.build()); len(o) != 1 || o[0].why != ReasonCollision {
			t.Fatalf("reclaim %v: retransmission on a held aggregator: %+v", reclaim, o)
		}
		o = run(s, workerPkt(2, 7, 3, 0, []int32{100, 200}).build())
		ps, _ := s.PoolStats(1)
		if !reclaim {
			if len(o) != 1 || o[0].why != ReasonCollision || s.Slot(0).Owner != MakeTag(1, 1, 0) || ps.ReclaimsHeld != 0 || ps.CollisionsOnHeld != 2 {
				t.Fatalf("without the option: %+v, slot %+v, pool %+v", o, s.Slot(0), ps)
			}
			continue
		}
		if len(o) != 0 || s.Slot(0).Owner != MakeTag(2, 7, 3) || s.Slot(0).State != StateClaimed || ps.ReclaimsHeld != 1 || ps.Reclaims != 1 {
			t.Fatalf("with the option: %+v, slot %+v, pool %+v", o, s.Slot(0), ps)
		}
		// Job 1's ACK (for its evicted aggregate) is multicast to job 1's
		// workers and leaves job 2's aggregator alone.
		o = run(s, psAck(1, 1, 0, []int32{11, 22}))
		if len(o) != 2 || o[0].why != ReasonAck {
			t.Fatalf("stale ack: %+v", o)
		}
		if si := s.Slot(0); si.Owner != MakeTag(2, 7, 3) || si.State != StateClaimed || si.Count != 1 || si.Bitmap != 1 {
			t.Fatalf("stale ack changed the new occupant: %+v", si)
		}
		if ps, _ := s.PoolStats(1); ps.Releases != 0 {
			t.Fatalf("stale ack released: %+v", ps)
		}
		o = run(s, workerPkt(2, 7, 3, 1, []int32{3, 4}).build())
		if len(o) != 1 || o[0].why != ReasonResult || o[0].port != 40 {
			t.Fatalf("job 2's result: %+v", o)
		}
		if m, v := resultOf(t, o[0]); m.Job != 2 || m.Chunk != 3 || m.Bitmap != 3 || v[0] != 103 || v[1] != 204 {
			t.Fatalf("job 2's result %+v %v, want 103 204", m, v)
		}
		// Job 1's ACK again (the PS repeats it): job 2's held aggregator
		// stays held, its sum intact, until job 2's own ACK.
		if o := run(s, psAck(1, 1, 0, []int32{11, 22})); len(o) != 2 || o[0].why != ReasonAck {
			t.Fatalf("repeated stale ack: %+v", o)
		}
		if si := s.Slot(0); si.Owner != MakeTag(2, 7, 3) || si.State != StateHeld {
			t.Fatalf("stale ack freed the new occupant's held aggregator: %+v", si)
		}
		if v := s.Values(nil, 0); v[0] != 103 || v[1] != 204 {
			t.Fatalf("stale ack changed the held sum: %v", v[:2])
		}
		run(s, psAck(2, 7, 3, []int32{103, 204}))
		if si := s.Slot(0); si.State != StateFree {
			t.Fatalf("job 2's ACK did not release: %+v", si)
		}
	}
}

// refHashSlot is chunk c's aggregator of job with budget b in a pool of n
// aggregators, from CRC-32/IEEE of (job, 0, c mod b) written out here.
func refHashSlot(job uint16, c uint32, b, n int) int {
	return refPerm(job, 0, c%uint32(b)%uint32(n), uint32(n))
}

// TestBudget: a job with Budget 8 maps chunk c of every all-reduce to
// Perm(job, 0)(c mod 8): exactly 8 aggregators of a 64-aggregator pool,
// whatever the all-reduce, and its sums stay exact; Budget 0 keeps the
// all-reduce in the key.
func TestBudget(t *testing.T) {
	s := newTestSwitch(t, 256)
	s.SetPool(1, 0, 128, 2) // 64 aggregators of stride 2
	installJob(t, s, 3, 2, StageHashed, 1, 0, 40)
	if err := s.SetJob(JobSpec{ID: 3, Mask: 3, Group: 3, PSPort: 40, PolicyID: StageHashed, PoolID: 1, Budget: 8}); err != nil {
		t.Fatal(err)
	}
	heads := map[int]bool{}
	for ar := uint16(1); ar <= 3; ar++ {
		for c := uint32(0); c < 40; c++ {
			a := []int32{int32(c) * 7, -int32(ar), 1 << 30}
			b := []int32{int32(ar) * 1000, int32(c), 1 << 30}
			o := run(s, workerPkt(3, ar, c, 0, a).build(), workerPkt(3, ar, c, 1, b).build())
			if len(o) != 2 {
				t.Fatalf("ar %d chunk %d: %d outputs, want the result to 2 workers", ar, c, len(o))
			}
			m, v := resultOf(t, o[0])
			want := []int32{int32(c)*7 + int32(ar)*1000, int32(c) - int32(ar), 1<<31 - 1}
			if v[0] != want[0] || v[1] != want[1] || v[2] != want[2] || m.Flags&inahdr.FlagOverflow == 0 {
				t.Fatalf("ar %d chunk %d: %v flags %#x, want %v (saturated)", ar, c, v, m.Flags, want)
			}
			if wantHead := 2 * refHashSlot(3, c, 8, 64); int(m.Slot) != wantHead {
				t.Fatalf("ar %d chunk %d: slot %d, want %d", ar, c, m.Slot, wantHead)
			}
			heads[int(m.Slot)] = true
		}
	}
	if len(heads) != 8 {
		t.Fatalf("budget 8: %d aggregators touched, want 8", len(heads))
	}
	j := s.jobByID(3)
	j.Budget = 0
	if h, _ := (Hashed{}).Locate(j, MakeTag(3, 2, 5)); h != 2*HashIndex(MakeTag(3, 2, 5), 64) {
		t.Fatalf("budget 0: head %d", h)
	}
}

// TestJobOptionErrors: SetJob refuses a budget out of range or on a stage
// without hashing, and ReclaimHeld off the preemptive stage, naming the
// option and its value.
func TestJobOptionErrors(t *testing.T) {
	s := newTestSwitch(t, 64)
	s.SetPool(1, 0, 16, 1)
	for _, c := range []struct {
		js   JobSpec
		want string
	}{
		{JobSpec{ID: 1, PolicyID: StageHashed, PoolID: 1, Budget: -1}, "budget -1"},
		{JobSpec{ID: 1, PolicyID: StageHashed, PoolID: 1, Budget: 17}, "budget 17: must be 0 (the whole pool) or at most pool 1's 16 aggregators"},
		{JobSpec{ID: 1, PolicyID: StageStatic, PoolID: 1, Budget: 4}, "budget 4: only the hashed and preemptive stages"},
		{JobSpec{ID: 1, PolicyID: StageHashed, PoolID: 1, ReclaimHeld: true}, "reclaim held: only the preemptive stage"},
	} {
		err := s.SetJob(c.js)
		if !errors.Is(err, ErrJobOption) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want ErrJobOption with %q", c.js, err, c.want)
		}
	}
	for _, js := range []JobSpec{
		{ID: 1, PolicyID: StagePreemptive, PoolID: 1, Budget: 16, ReclaimHeld: true},
		{ID: 1, PolicyID: StageHashed, PoolID: 1, Budget: 1},
	} {
		if err := s.SetJob(js); err != nil {
			t.Errorf("%+v: %v", js, err)
		}
	}
}
