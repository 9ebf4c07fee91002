package sw

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

func randVals(r *rand.Rand, n int, lim int32) []int32 {
	v := make([]int32, n)
	for i := range v {
		v[i] = r.Int32N(2*lim) - lim
	}
	return v
}

// TestAggregationExact: 2..32 workers, random order, random duplicates and
// retransmissions; every chunk completes exactly once with the exact sum.
func TestAggregationExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{2, 3, 4, 7, 8, 16, 31, 32} {
		for _, pol := range []int{StageStatic, StageHashed, StagePreemptive} {
			s := newTestSwitch(t, 1024)
			if err := s.SetPool(1, 0, 1024, 4); err != nil {
				t.Fatal(err)
			}
			installJob(t, s, 1, n, pol, 1, 0, 40)
			for chunk := uint32(0); chunk < 6; chunk++ {
				count := []int{1, 64, 100, 256}[chunk%4]
				vals := make([][]int32, n)
				want := make([]int64, count)
				var frames [][]byte
				for w := 0; w < n; w++ {
					vals[w] = randVals(r, count, 1<<20)
					for i, v := range vals[w] {
						want[i] += int64(v)
					}
					f := workerPkt(1, 9, chunk, uint8(w), vals[w]).build()
					frames = append(frames, f)
					if r.IntN(3) == 0 { // duplicate before completion
						frames = append(frames, f)
					}
				}
				r.Shuffle(len(frames), func(i, j int) { frames[i], frames[j] = frames[j], frames[i] })
				// feed in random batch sizes
				var outs []out
				for len(frames) > 0 {
					k := 1 + r.IntN(len(frames))
					outs = append(outs, run(s, frames[:k]...)...)
					frames = frames[k:]
				}
				// Last packet may have been a duplicate after completion:
				// those come back as unicast "resent" results.
				results := 0
				for _, o := range outs {
					m, got := resultOf(t, o)
					if m.Flags&inahdr.FlagResult == 0 {
						t.Fatalf("n=%d pol=%d: non-result output %+v", n, pol, m)
					}
					if o.why == ReasonResult {
						results++
					}
					if m.Bitmap != uint32(uint64(1)<<n-1) || m.Chunk != chunk || m.Flags&inahdr.FlagOverflow != 0 {
						t.Fatalf("n=%d: result meta %+v", n, m)
					}
					for i := range got {
						if int64(got[i]) != want[i] {
							t.Fatalf("n=%d pol=%d chunk %d value %d = %d, want %d", n, pol, chunk, i, got[i], want[i])
						}
					}
				}
				if results != n { // one multicast copy per worker
					t.Fatalf("n=%d pol=%d chunk %d: %d result copies, want %d", n, pol, chunk, results, n)
				}
			}
			js, _ := s.JobStats(1)
			if js.Results != 6 {
				t.Fatalf("results %d", js.Results)
			}
		}
	}
}

func TestRetransmissions(t *testing.T) {
	s := newTestSwitch(t, 64)
	s.SetPool(1, 0, 64, 1)
	installJob(t, s, 1, 3, StageStatic, 1, 0, 40)
	p0 := workerPkt(1, 1, 5, 0, []int32{10, 20}).build()
	p1 := workerPkt(1, 1, 5, 1, []int32{1, 2}).build()
	p2 := workerPkt(1, 1, 5, 2, []int32{100, 200}).build()
	if o := run(s, p0, p0, p1, p1, p0); len(o) != 0 {
		t.Fatalf("partial emitted %d", len(o))
	}
	si := s.Slot(5)
	if si.Count != 2 || si.Bitmap != 3 || si.State != StateClaimed {
		t.Fatalf("slot %+v", si)
	}
	o := run(s, p2)
	if len(o) != 3 {
		t.Fatalf("want 3 copies, got %d", len(o))
	}
	_, v := resultOf(t, o[0])
	if v[0] != 111 || v[1] != 222 {
		t.Fatalf("sum %v", v)
	}
	// Retransmission after completion: unicast result back to the sender.
	o = run(s, p1)
	if len(o) != 1 || o[0].port != 2 || o[0].why != ReasonResent {
		t.Fatalf("resend: %+v", o)
	}
	m, v := resultOf(t, o[0])
	if v[0] != 111 || m.Flags&inahdr.FlagResult == 0 {
		t.Fatalf("resent %v %+v", v, m)
	}
	if si := s.Slot(5); si.Count != 3 {
		t.Fatalf("count changed by retransmission: %+v", si)
	}
	js, _ := s.JobStats(1)
	if js.Duplicates != 3 || js.Resent != 1 || js.Results != 1 {
		t.Fatalf("stats %+v", js)
	}
}

func TestOverflowFlagged(t *testing.T) {
	s := newTestSwitch(t, 64)
	s.SetPool(1, 0, 64, 1)
	installJob(t, s, 1, 2, StageHashed, 1, 0, 40)
	o := run(s, workerPkt(1, 1, 1, 0, []int32{math.MaxInt32 - 1, math.MinInt32 + 1, 5}).build(),
		workerPkt(1, 1, 1, 1, []int32{10, -10, 6}).build())
	if len(o) != 2 {
		t.Fatalf("outs %d", len(o))
	}
	m, v := resultOf(t, o[0])
	if m.Flags&inahdr.FlagOverflow == 0 || v[0] != math.MaxInt32 || v[1] != math.MinInt32 || v[2] != 11 {
		t.Fatalf("overflow: %+v %v", m, v)
	}
	js, _ := s.JobStats(1)
	if js.Overflows != 1 {
		t.Fatalf("overflows %d", js.Overflows)
	}
	// next chunk in another aggregator is clean
	o = run(s, workerPkt(1, 1, 2, 0, []int32{1}).build(), workerPkt(1, 1, 2, 1, []int32{1}).build())
	if m, _ := resultOf(t, o[0]); m.Flags&inahdr.FlagOverflow != 0 {
		t.Fatal("overflow leaked")
	}
}

// TestForeignFlood: packets claiming job 2 from job 1's ports/QPs, unknown
// QPs and malformed headers never change job 2's (or 1's) slots.
func TestForeignFlood(t *testing.T) {
	s := newTestSwitch(t, 256)
	s.SetPool(1, 0, 128, 1)
	s.SetPool(2, 128, 128, 1)
	installJob(t, s, 1, 4, StageStatic, 1, 0, 40)
	installJob(t, s, 2, 4, StageHashed, 2, 0, 41)
	// job 2 partially aggregates some chunks
	for c := uint32(0); c < 20; c++ {
		run(s, workerPkt(2, 1, c, 0, []int32{1, 2, 3}).build())
	}
	snap := func() []SlotInfo {
		var v []SlotInfo
		for i := 0; i < 256; i++ {
			v = append(v, s.Slot(i))
		}
		return v
	}
	before := snap()
	var vb []int32
	for i := 0; i < 256; i++ {
		vb = s.Values(vb, i)
	}
	r := rand.New(rand.NewPCG(3, 4))
	st0 := s.Stats()
	const flood = 5000
	var frames [][]byte
	for i := 0; i < flood; i++ {
		w := uint8(r.IntN(4))
		p := workerPkt(2, 1, uint32(r.IntN(40)), w, []int32{1 << 20, 7})
		switch i % 5 {
		case 0: // right header, job 1's QP (port/QP belongs to job 1)
			p.qp = qpFor(1, w)
		case 1: // unknown QP
			p.qp = 0x777
		case 2: // job 1 header from job 2's port but wrong worker id
			p.meta.Worker = (w + 1) % 4
		case 3: // pretends to be the PS
			p.meta.Flags = inahdr.FlagFromPS | inahdr.FlagResult
		case 4: // malformed count
			p.vals = nil
		}
		f := p.build()
		if i%5 == 4 { // a valid frame (ICRC) with a header that lies about its length
			inahdr.Header(f[54:]).SetCount(2000)
			_ = rdma.SetICRC(f)
		}
		frames = append(frames, f)
	}
	for len(frames) > 0 {
		k := min(64, len(frames))
		if o := run(s, frames[:k]...); len(o) != 0 {
			t.Fatalf("flood produced output: %v", o[0].why)
		}
		frames = frames[k:]
	}
	after := snap()
	var va []int32
	for i := 0; i < 256; i++ {
		va = s.Values(va, i)
	}
	for i := range before {
		if before[i] != after[i] {
			t.Fatalf("slot %d changed: %+v -> %+v", i, before[i], after[i])
		}
	}
	for i := range vb {
		if vb[i] != va[i] {
			t.Fatalf("value %d changed", i)
		}
	}
	st := s.Stats()
	dropped := st.ByReason[ReasonForeign] + st.ByReason[ReasonMalformed] - st0.ByReason[ReasonForeign] - st0.ByReason[ReasonMalformed]
	if dropped != flood {
		t.Fatalf("dropped %d of %d", dropped, flood)
	}
	if js, _ := s.JobStats(2); js.Foreign == 0 {
		t.Fatal("foreign not counted per job")
	}
}

func TestCollisionFallback(t *testing.T) {
	s := newTestSwitch(t, 16)
	s.SetPool(1, 0, 1, 1) // one aggregator shared by two jobs
	installJob(t, s, 1, 2, StageHashed, 1, 0, 40)
	installJob(t, s, 2, 2, StageHashed, 1, 0, 41)
	run(s, workerPkt(1, 1, 0, 0, []int32{5}).build())
	o := run(s, workerPkt(2, 1, 0, 0, []int32{7}).build())
	if len(o) != 1 || o[0].port != 41 || o[0].why != ReasonCollision {
		t.Fatalf("collision: %+v", o)
	}
	m, v := resultOf(t, o[0])
	if m.Flags&inahdr.FlagCollision == 0 || v[0] != 7 || m.Job != 2 {
		t.Fatalf("collision pkt %+v %v", m, v)
	}
	if si := s.Slot(0); si.Owner != MakeTag(1, 1, 0) || si.Count != 1 {
		t.Fatalf("owner changed %+v", si)
	}
	// job 1 completes, then job 2 can reclaim (hashed: complete is reclaimable)
	run(s, workerPkt(1, 1, 0, 1, []int32{6}).build())
	run(s, workerPkt(2, 1, 0, 0, []int32{7}).build())
	if si := s.Slot(0); si.Owner != MakeTag(2, 1, 0) {
		t.Fatalf("no reclaim %+v", si)
	}
}

func TestPreemption(t *testing.T) {
	s := newTestSwitch(t, 16)
	s.SetPool(1, 0, 1, 1)
	installJob(t, s, 1, 3, StagePreemptive, 1, 1, 40)
	installJob(t, s, 2, 2, StagePreemptive, 1, 5, 41)
	run(s, workerPkt(1, 1, 0, 0, []int32{5, 6}).build(), workerPkt(1, 1, 0, 2, []int32{1, 1}).build())
	// low priority cannot preempt high; high preempts low.
	o := run(s, workerPkt(2, 3, 9, 1, []int32{100, 200}).build())
	if len(o) != 1 || o[0].port != 40 || o[0].why != ReasonPreempted {
		t.Fatalf("preempt: %+v", o)
	}
	m, v := resultOf(t, o[0])
	if m.Flags&inahdr.FlagPartial == 0 || m.Job != 1 || m.Chunk != 0 || m.Bitmap != 5 || v[0] != 6 || v[1] != 7 {
		t.Fatalf("partial %+v %v", m, v)
	}
	if si := s.Slot(0); si.Owner != MakeTag(2, 3, 9) || si.Priority != 5 {
		t.Fatalf("slot %+v", si)
	}
	// job 1's late worker collides now, goes to its PS
	o = run(s, workerPkt(1, 1, 0, 1, []int32{1, 1}).build())
	if len(o) != 1 || o[0].why != ReasonCollision || o[0].port != 40 {
		t.Fatalf("late: %+v", o)
	}
	// job 2 completes with the exact sum
	o = run(s, workerPkt(2, 3, 9, 0, []int32{1, 2}).build())
	if len(o) != 2 {
		t.Fatalf("outs %d", len(o))
	}
	if _, v := resultOf(t, o[0]); v[0] != 101 || v[1] != 202 {
		t.Fatalf("sum %v", v)
	}
	ps, _ := s.PoolStats(1)
	if ps.Preemptions != 1 || ps.Collisions != 1 {
		t.Fatalf("pool stats %+v", ps)
	}
}

// TestPreemptionSameSize: a contribution preempts only a chunk of its own
// size (the evicted sum leaves in its packet); one of another size — a
// tensor's shorter last chunk, or a longer one — collides to its own PS and
// leaves the occupant's partial sum whole.
func TestPreemptionSameSize(t *testing.T) {
	for _, vals := range [][]int32{{100}, {100, 200, 300}} {
		s := newTestSwitch(t, 16)
		s.SetPool(1, 0, 1, 1)
		installJob(t, s, 1, 3, StagePreemptive, 1, 1, 40)
		installJob(t, s, 2, 2, StagePreemptive, 1, 5, 41)
		run(s, workerPkt(1, 1, 0, 0, []int32{5, 6}).build())
		if n, _ := s.ReadRegister("ina_size", 0); n != 2 {
			t.Fatalf("ina_size = %d, want 2", n)
		}
		o := run(s, workerPkt(2, 3, 9, 1, vals).build())
		if len(o) != 1 || o[0].port != 41 || o[0].why != ReasonCollision {
			t.Fatalf("%d values against 2: %+v, want a collision to port 41", len(vals), o)
		}
		if si := s.Slot(0); si.Owner != MakeTag(1, 1, 0) || si.Bitmap != 1 {
			t.Fatalf("%d values: occupant changed: %+v", len(vals), si)
		}
		// the occupant completes with its whole sum
		run(s, workerPkt(1, 1, 0, 1, []int32{1, 1}).build())
		o = run(s, workerPkt(1, 1, 0, 2, []int32{1, 1}).build())
		if len(o) < 1 {
			t.Fatalf("%d values: no result", len(vals))
		}
		if _, v := resultOf(t, o[0]); len(v) != 2 || v[0] != 7 || v[1] != 8 {
			t.Fatalf("%d values: sum %v, want [7 8]", len(vals), v)
		}
		if ps, _ := s.PoolStats(1); ps.Preemptions != 0 || ps.Collisions != 1 {
			t.Fatalf("%d values: pool stats %+v", len(vals), ps)
		}
	}
}

// TestATPResultToPS: result goes to the PS, aggregator held until the ACK,
// which releases it and is multicast.
func TestATPResultToPS(t *testing.T) {
	s := newTestSwitch(t, 16)
	s.SetPool(1, 0, 4, 1)
	installJob(t, s, 1, 2, StageHashed, 1, 0, 40)
	js := JobSpec{ID: 1, Mask: 3, Group: 1, PSPort: 40, ResultToPS: true, PolicyID: StageHashed, PoolID: 1}
	if err := s.SetJob(js); err != nil {
		t.Fatal(err)
	}
	o := run(s, workerPkt(1, 1, 3, 0, []int32{1}).build(), workerPkt(1, 1, 3, 1, []int32{2}).build())
	if len(o) != 1 || o[0].port != 40 {
		t.Fatalf("to PS %+v", o)
	}
	head := HashIndex(MakeTag(1, 1, 3), 4)
	if si := s.Slot(head); si.State != StateHeld {
		t.Fatalf("state %v", si.State)
	}
	if st := s.Stats(); st.SlotsComplete != 1 || st.SlotsFree != 15 {
		t.Fatalf("slot counters %+v", st)
	}
	ack := workerPkt(1, 1, 3, 0, []int32{3})
	ack.srcMAC = mac(100)
	ack.qp = qpFor(1, 0xFF)
	ack.meta.Flags = inahdr.FlagFromPS | inahdr.FlagResult
	ack.meta.Worker = 0
	o = run(s, ack.build())
	if len(o) != 2 || o[0].why != ReasonAck {
		t.Fatalf("ack %+v", o)
	}
	if si := s.Slot(head); si.State != StateFree {
		t.Fatalf("not released %v", si.State)
	}
}

func TestRecirculationCounted(t *testing.T) {
	s := newTestSwitch(t, 64)
	s.SetPool(1, 0, 64, 4)
	installJob(t, s, 1, 2, StageStatic, 1, 0, 40)
	a, b := make([]int32, 256), make([]int32, 256)
	for i := range a {
		a[i], b[i] = int32(i), int32(1000*i)
	}
	o := run(s, workerPkt(1, 1, 1, 0, a).build(), workerPkt(1, 1, 1, 1, b).build())
	_, v := resultOf(t, o[0])
	for i := range v {
		if v[i] != int32(1001*i) {
			t.Fatalf("v[%d]=%d", i, v[i])
		}
	}
	st := s.Stats()
	if st.Passes != 8 || st.Recirculations != 6 || st.PipelineLoad() != 4 {
		t.Fatalf("passes %d recirc %d", st.Passes, st.Recirculations)
	}
	// chunk 1 uses aggregator 1 = slots 4..7, each lane written once per pass
	if got, _ := s.ReadRegister("ina_v01", 5); got != 1001*65 {
		t.Fatalf("slot 5 lane 1 = %d", got)
	}
	// a packet larger than the pool's stride collides to the PS
	big := make([]int32, 320)
	o = run(s, workerPkt(1, 1, 2, 0, big).build())
	if len(o) != 1 || o[0].why != ReasonCollision {
		t.Fatalf("big: %+v", o)
	}
}

func TestPlainForwarding(t *testing.T) {
	s := newTestSwitch(t, 16)
	s.AddL2(mac(7), 7)
	p := workerPkt(1, 1, 1, 0, []int32{1}) // INA marker but bypass flag
	p.meta.Flags = inahdr.FlagBypass
	p.dstMAC = mac(7)
	f := p.build()
	o := run(s, f)
	if len(o) != 1 || o[0].port != 7 || string(o[0].frame) != string(f) {
		t.Fatalf("l2: %+v", o)
	}
	p.dstMAC = mac(8)
	if o := run(s, p.build()); len(o) != 0 {
		t.Fatal("miss should drop")
	}
	pr := netipPrefix("10.0.0.0/24")
	s.AddRoute(pr, 9)
	if o := run(s, p.build()); len(o) != 1 || o[0].port != 9 {
		t.Fatal("lpm")
	}
	s.AddRoute(netipPrefix("10.0.0.100/32"), 10)
	if o := run(s, p.build()); len(o) != 1 || o[0].port != 10 {
		t.Fatal("longest prefix")
	}
}

func TestProcessZeroAlloc(t *testing.T) {
	s := newTestSwitch(t, 1024)
	s.SetPool(1, 0, 1024, 1)
	installJob(t, s, 1, 4, StageHashed, 1, 0, 40)
	var frames []Frame
	for w := 0; w < 4; w++ {
		frames = append(frames, Frame{Data: workerPkt(1, 1, 0, uint8(w), make([]int32, 64)).build(), InPort: w + 1})
	}
	ms := s.AppendMembers(nil, 1)
	chunk := uint32(0)
	allocs := testing.AllocsPerRun(200, func() {
		chunk++
		for i := range frames {
			inahdr.Header(frames[i].Data[54:]).SetChunk(chunk)
		}
		s.Process(frames)
		for _, f := range frames {
			if f.Action == ActMulticast {
				s.Egress(f.Data, ms[0])
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per batch", allocs)
	}
}

func TestStages(t *testing.T) {
	pool := &Pool{ID: 1, Base: 100, Slots: 40, Stride: 4}
	j := &Job{ID: 3, Pool: pool, Priority: 2}
	for c := uint32(0); c < 25; c++ {
		got, ok := Static{}.Locate(j, MakeTag(3, 1, c))
		if !ok || got != 100+int(c%10)*4 {
			t.Fatalf("static %d -> %d", c, got)
		}
		h, _ := Hashed{}.Locate(j, MakeTag(3, 1, c))
		if h != 100+HashIndex(MakeTag(3, 1, c), 10)*4 || (h-100)%4 != 0 {
			t.Fatalf("hashed %d", h)
		}
	}
	cases := []struct {
		p interface {
			SlotStage
			contender
		}
		occ  Occupant
		want Verdict
	}{
		{Static{}, Occupant{Tag: MakeTag(3, 1, 0), State: StateComplete}, Reclaim},
		{Static{}, Occupant{Tag: MakeTag(4, 1, 0), State: StateComplete}, Collide},
		{Static{}, Occupant{Tag: MakeTag(3, 1, 0), State: StateClaimed}, Collide},
		{Hashed{}, Occupant{Tag: MakeTag(4, 1, 0), State: StateComplete}, Reclaim},
		{Hashed{}, Occupant{Tag: MakeTag(4, 1, 0), State: StateHeld}, Collide},
		{Hashed{}, Occupant{Tag: MakeTag(4, 1, 0), State: StateClaimed}, Collide},
		{Preemptive{}, Occupant{Tag: MakeTag(4, 1, 0), State: StateClaimed, Priority: 1}, Preempt},
		{Preemptive{}, Occupant{Tag: MakeTag(4, 1, 0), State: StateClaimed, Priority: 2}, Collide},
		{Preemptive{}, Occupant{Tag: MakeTag(4, 1, 0), State: StateHeld, Priority: 0}, Collide},
		{Preemptive{}, Occupant{Tag: MakeTag(4, 1, 0), State: StateComplete, Priority: 9}, Reclaim},
	}
	for i, c := range cases {
		if got := c.p.Contend(j, MakeTag(j.ID, 1, 1<<20), c.occ); got != c.want {
			t.Errorf("case %d %s: %v want %v", i, c.p.Name(), got, c.want)
		}
	}
	// ReclaimHeld: the preemptive stage reclaims a held aggregator of any
	// priority; the hashed stage ignores the option.
	jr := &Job{ID: 3, Pool: pool, Priority: 2, ReclaimHeld: true}
	for _, c := range []struct {
		p    contender
		occ  Occupant
		want Verdict
	}{
		{Preemptive{}, Occupant{Tag: MakeTag(4, 1, 0), State: StateHeld, Priority: 9}, Reclaim},
		{Preemptive{}, Occupant{Tag: MakeTag(4, 1, 0), State: StateClaimed, Priority: 9}, Collide},
		{Hashed{}, Occupant{Tag: MakeTag(4, 1, 0), State: StateHeld}, Collide},
	} {
		if got := c.p.Contend(jr, MakeTag(jr.ID, 1, 1<<20), c.occ); got != c.want {
			t.Errorf("reclaim held, %T on %v: %v want %v", c.p, c.occ.State, got, c.want)
		}
	}
}

// noMem is a contention stage with FreeINA-style memory: only all-reduces
// with a lease get an aggregator.
type noMem struct{ lease map[uint16]int }

func (noMem) Name() string { return "lease" }
func (p noMem) Locate(j *Job, t Tag) (int, bool) {
	b, ok := p.lease[t.AllReduce()]
	return b + int(t.Chunk()%4), ok
}
func (noMem) Contend(*Job, Tag, Occupant) Verdict { return Collide }
func (p noMem) contribute(c contribution)         { c.contend(p) }

func TestCustomStage(t *testing.T) {
	s := newTestSwitch(t, 64)
	s.SetPool(1, 0, 64, 1)
	if err := s.RegisterStage(StageCustom, noMem{lease: map[uint16]int{7: 8}}); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterStage(StageHashed, Hashed{}); !errors.Is(err, ErrStageInUse) {
		t.Fatalf("re-register a built-in id: %v", err)
	}
	if err := s.RegisterStage(StageCustom, Hashed{}); !errors.Is(err, ErrStageInUse) {
		t.Fatalf("re-register a custom id: %v", err)
	}
	if err := s.SetJob(JobSpec{ID: 2, Mask: 1, PolicyID: StageCustom + 1, PoolID: 1}); !errors.Is(err, ErrNoStage) {
		t.Fatalf("unknown stage id: %v", err)
	}
	installJob(t, s, 1, 2, StageCustom, 1, 0, 40)
	if o := run(s, workerPkt(1, 6, 1, 0, []int32{1}).build()); len(o) != 1 || o[0].why != ReasonCollision {
		t.Fatal("no lease should go to PS")
	}
	run(s, workerPkt(1, 7, 1, 0, []int32{1}).build())
	if si := s.Slot(9); si.Owner != MakeTag(1, 7, 1) {
		t.Fatalf("lease slot %+v", si)
	}
}

// TestHashIndex checks HashIndex against refPerm (its definition written
// out over byte CRCs) and the two properties it is for: it permutes any n
// consecutive chunks of one all-reduce (a job never collides with itself),
// and two jobs in lockstep overlap as random sets do, where a CRC-32 mod n
// of the tag does not (docs/results.md, "ATP's aggregator hash").
func TestHashIndex(t *testing.T) {
	if got, want := refJenkins(0), uint32(0x6b4ed927); got != want {
		t.Fatalf("Jenkins(0) = %#x, want %#x (burtleburtle.net's 6-shift hash)", got, want)
	}
	if got, want := refJenkins(0xdeadbeef), uint32(0x7ff0eada); got != want {
		t.Fatalf("Jenkins(0xdeadbeef) = %#x, want %#x", got, want)
	}
	for _, n := range []int{1, 2, 3, 7, 64, 285, 512, 1000, 1 << 20} {
		for _, tag := range []Tag{0, MakeTag(1, 2, 3), MakeTag(0xFFFF, 0xFFFF, 0xFFFFFFFF), MakeTag(5, 9, 123456)} {
			if got, want := HashIndex(tag, n), refPerm(tag.Job(), tag.AllReduce(), tag.Chunk()%uint32(n), uint32(n)); got != want {
				t.Fatalf("HashIndex(%x, %d) = %d, want %d", tag, n, got, want)
			}
		}
		if n > 1000 {
			continue
		}
		for _, key := range []Tag{MakeTag(1, 1, 0), MakeTag(7, 300, 0)} {
			seen := make([]bool, n)
			for c := uint32(1000); c < 1000+uint32(n); c++ {
				i := HashIndex(key|Tag(c), n)
				if i < 0 || i >= n || seen[i] {
					t.Fatalf("n %d, job %d: chunk %d -> %d, taken or out of range", n, key.Job(), c, i)
				}
				seen[i] = true
			}
		}
	}
	// Two jobs' windows of 285 chunks in a pool of 512, in lockstep from
	// chunk 0 (as at tensor_scale 0.01) and from 300000 (true scale): job
	// 2's chunks land on job 1's busy aggregators 285/512 = 55.7 % of the
	// time at random; a CRC-32 of the tag gives 6-17 %.
	const w, n = 285, 512
	for _, base := range []uint32{0, 300000} {
		hit, all := 0, 0
		for ar := uint16(1); ar <= 4; ar++ {
			for x := base; x < base+4000; x += w {
				busy := make([]bool, n)
				for c := x; c < x+w; c++ {
					busy[HashIndex(MakeTag(1, ar, c), n)] = true
				}
				for c := x; c < x+w; c++ {
					if busy[HashIndex(MakeTag(2, ar, c), n)] {
						hit++
					}
					all++
				}
			}
		}
		if f := float64(hit) / float64(all); f < 0.52 || f > 0.60 {
			t.Errorf("chunks from %d: %.1f %% of job 2's land on job 1's aggregators, want 55.7 %% ± 4", base, 100*f)
		}
	}
}

// TestPermCache: the per-job cache of HashIndex's permutation answers as
// the permutation itself through all-reduces that alternate, pool sizes
// that change and a generation counter that wraps.
func TestPermCache(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var pc permCache
	for i := range 20000 {
		ar := uint16(r.IntN(3))
		n := []uint32{2, 3, 512, 1000}[r.IntN(4)]
		if i%1000 == 999 {
			pc.gen = ^uint32(0) // the next move wraps it
		}
		x := uint32(r.IntN(int(n)))
		if got, want := pc.of(9, ar, x, n), permute(9, ar, x, n); got != want {
			t.Fatalf("step %d: ar %d n %d x %d: cached %d, want %d", i, ar, n, x, got, want)
		}
	}
}

// TestLaneKernels checks the lane kernels against int64 arithmetic, with
// the wide (AVX2) kernels and without them, for blocks of every length up
// to 300 lanes: random lanes, edge values, and a block with one lane that
// overflows, at each position in turn.
func TestLaneKernels(t *testing.T) {
	edge := []int32{math.MaxInt32, math.MinInt32, -1, 0, 1, math.MaxInt32 - 1, math.MinInt32 + 1}
	for _, w := range laneModes(t) {
		t.Run(fmt.Sprintf("wide=%v", w), func(t *testing.T) {
			defer setWide(w)()
			r := rand.New(rand.NewPCG(5, 6))
			for n := 0; n < 300; n++ {
				reg, in := make([]int32, n), make([]int32, n)
				for i := range reg {
					reg[i], in[i] = int32(r.Uint32()), int32(r.Uint32())
					switch {
					case i%3 == 0:
						in[i] >>= 8 // mostly non-overflowing lanes, too
					case i%7 == 1:
						reg[i], in[i] = edge[r.IntN(len(edge))], edge[r.IntN(len(edge))]
					}
				}
				checkLanes(t, reg, in)
			}
			for _, n := range []int{16, 64, 77, 256} {
				for at := range n {
					reg, in := make([]int32, n), make([]int32, n)
					for i := range reg {
						reg[i], in[i] = int32(r.Uint32())>>2, int32(r.Uint32())>>2
					}
					reg[at], in[at] = edge[r.IntN(2)], edge[r.IntN(2)]
					if r.IntN(2) == 0 {
						reg[at], in[at] = math.MaxInt32-5, 6
					}
					checkLanes(t, reg, in)
				}
			}
		})
	}
}

// FuzzLaneKernels checks the lane kernels, wide and portable, against
// int64 arithmetic on registers and packet values from the fuzzer's bytes.
func FuzzLaneKernels(f *testing.F) {
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1})
	f.Add(make([]byte, 8*40))
	f.Fuzz(func(t *testing.T, b []byte) {
		n := len(b) / 8
		reg, in := make([]int32, n), make([]int32, n)
		for i := range n {
			reg[i] = int32(binary.LittleEndian.Uint32(b[8*i:]))
			in[i] = int32(binary.LittleEndian.Uint32(b[8*i+4:]))
		}
		for _, w := range laneModes(t) {
			restore := setWide(w)
			checkLanes(t, reg, in)
			restore()
		}
	})
}

// laneModes are the values of wide to test: false, and true where the
// build has wide kernels and the CPU runs them.
func laneModes(t testing.TB) []bool {
	if !wide {
		t.Logf("no wide lane kernels here (build or CPU): the portable loops only")
		return []bool{false}
	}
	return []bool{false, true}
}

// setWide sets wide to w and returns what puts it back.
func setWide(w bool) func() {
	was := wide
	wide = w
	return func() { wide = was }
}

// checkLanes runs every lane kernel on registers reg and packet values in
// and compares each result with int64 arithmetic.
func checkLanes(t *testing.T, reg, in []int32) {
	t.Helper()
	n := len(reg)
	regs := func(v []int32) []uint32 {
		out := make([]uint32, len(v))
		for i, x := range v {
			out[i] = regOf(x)
		}
		return out
	}
	pkt := make([]byte, 4*n)
	for i, v := range in {
		binary.BigEndian.PutUint32(pkt[4*i:], uint32(v))
	}
	want := make([]int32, n)
	anyOvf := false
	for i := range want {
		s := int64(reg[i]) + int64(in[i])
		if s > math.MaxInt32 || s < math.MinInt32 {
			anyOvf = true
		}
		want[i] = int32(max(math.MinInt32, min(math.MaxInt32, s)))
	}
	got := regs(reg)
	p := append([]byte(nil), pkt...)
	if o := addReadBlock(got, p); o != anyOvf {
		t.Fatalf("n=%d overflow %v want %v", n, o, anyOvf)
	}
	for i := range want {
		if valueOf(got[i]) != want[i] || int32(binary.BigEndian.Uint32(p[4*i:])) != want[i] {
			t.Fatalf("n=%d lane %d: %d want %d", n, i, valueOf(got[i]), want[i])
		}
	}
	got = regs(reg)
	if o := addBlock(got, pkt); o != anyOvf {
		t.Fatalf("n=%d addBlock overflow %v want %v", n, o, anyOvf)
	}
	for i := range want {
		if valueOf(got[i]) != want[i] {
			t.Fatalf("n=%d addBlock lane %d: %d want %d", n, i, valueOf(got[i]), want[i])
		}
	}
	w := make([]uint32, n)
	writeBlock(w, pkt)
	rd := make([]byte, 4*n)
	readBlock(regs(in), rd)
	sw := regs(reg)
	sp := append([]byte(nil), pkt...)
	swapBlock(sw, sp)
	for i := range in {
		if valueOf(w[i]) != in[i] || valueOf(sw[i]) != in[i] || int32(binary.BigEndian.Uint32(sp[4*i:])) != reg[i] ||
			int32(binary.BigEndian.Uint32(rd[4*i:])) != in[i] {
			t.Fatalf("n=%d write/read/swap lane %d", n, i)
		}
	}
}

func TestAggModIsMod(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	var a aggMod
	if got := a.aggregators(2, 3); got != 0 { // a pool smaller than its stride: no aggregator, no panic
		t.Fatalf("aggregators(2, 3) = %d, want 0", got)
	}
	for _, n := range []int{1, 2, 3, 7, 64, 1000, 4096, 4097, 65535, 65536, 1 << 20, 1<<31 - 1, 1 << 31, 1<<32 - 1} {
		for _, stride := range []int{1, 3, 4} {
			xs := []uint32{0, 1, uint32(n - 1), uint32(n), uint32(n + 1), math.MaxUint32, math.MaxUint32 - 1}
			for range 1000 {
				xs = append(xs, r.Uint32())
			}
			if got := a.aggregators(n*stride+stride-1, stride); got != uint32(n) {
				t.Fatalf("aggregators(%d, %d) = %d, want %d", n*stride+stride-1, stride, got, n)
			}
			for _, x := range xs {
				if got, want := a.of(x, uint32(n)), int(x%uint32(n)); got != want {
					t.Fatalf("%d mod %d (stride %d): %d want %d", x, n, stride, got, want)
				}
			}
		}
	}
}

// TestSlotsPerAggregator: one slot a pass of DefaultValuesPerPass values.
func TestSlotsPerAggregator(t *testing.T) {
	for _, c := range [][2]int{{0, 1}, {1, 1}, {64, 1}, {65, 2}, {128, 2}, {256, 4}} {
		if got := SlotsPerAggregator(c[0]); got != c[1] {
			t.Errorf("SlotsPerAggregator(%d) = %d, want %d", c[0], got, c[1])
		}
	}
}

// TestOverflowWide: a whole-lane contribution (64 values) that overflows
// when it is added, not when it completes the chunk, saturates each lane
// that overflowed, up and down, and flags the result; with the lanes'
// AVX2 kernels and without.
func TestOverflowWide(t *testing.T) {
	for _, w := range laneModes(t) {
		restore := setWide(w)
		s := newTestSwitch(t, 64)
		s.SetPool(1, 0, 64, 1)
		installJob(t, s, 1, 3, StageHashed, 1, 0, 40)
		a, b, c := make([]int32, 64), make([]int32, 64), make([]int32, 64)
		want := make([]int32, 64)
		for i := range a {
			switch i % 4 {
			case 0: // up
				a[i], b[i], c[i], want[i] = math.MaxInt32-5, int32(i)+6, -1, math.MaxInt32-1
			case 1: // down
				a[i], b[i], c[i], want[i] = math.MinInt32+5, -int32(i)-6, 1, math.MinInt32+1
			default:
				a[i], b[i], c[i] = int32(i), -3, 2
				want[i] = a[i] + b[i] + c[i]
			}
		}
		o := run(s, workerPkt(1, 1, 1, 0, a).build(), workerPkt(1, 1, 1, 1, b).build(), workerPkt(1, 1, 1, 2, c).build())
		restore()
		if len(o) != 3 {
			t.Fatalf("wide %t: outs %d", w, len(o))
		}
		m, v := resultOf(t, o[0])
		if m.Flags&inahdr.FlagOverflow == 0 || !slices.Equal(v, want) {
			t.Fatalf("wide %t: flags %#x, values %v, want %v", w, m.Flags, v, want)
		}
	}
}

// TestPassesFor: the passes n values take are ⌈n / ValuesPerPass⌉ for
// any ValuesPerPass, within the table and beyond it.
func TestPassesFor(t *testing.T) {
	for _, v := range []int{1, 3, 8, 48, 64, 1000} {
		s, err := New(Config{Slots: 64, ValuesPerPass: v, MaxPasses: 4, Ports: 8})
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n <= inahdr.MaxValues+80; n++ {
			if got, want := s.passesFor(n), (n+v-1)/v; got != want {
				t.Fatalf("ValuesPerPass %d: passesFor(%d) = %d, want %d", v, n, got, want)
			}
		}
	}
}
