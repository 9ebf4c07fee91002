package sw

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/inabox/inabox/switch/inahdr"
)

// TestLocateRemembered: a job of a pure stage that remembers its last
// located tag (Job.located) finds every contribution's aggregator where
// the stage's Locate puts it, while the pool moves and resizes under it,
// the job is installed again with another budget, and runs of one tag
// alternate with others; a job of a stage that is not pure remembers
// nothing.
func TestLocateRemembered(t *testing.T) {
	for _, tc := range []struct {
		stage  int
		budget int
	}{{StageStatic, 0}, {StageHashed, 0}, {StageHashed, 5}, {StagePreemptive, 0}, {StagePreemptive, 3}} {
		s := newTestSwitch(t, 256)
		if err := s.SetPool(1, 0, 64, 2); err != nil {
			t.Fatal(err)
		}
		if err := s.SetJob(JobSpec{ID: 3, Mask: 0xF, Group: 3, PSPort: 40, PolicyID: tc.stage, PoolID: 1, Budget: tc.budget}); err != nil {
			t.Fatal(err)
		}
		j := s.jobByID(3)
		if !j.pure {
			t.Fatalf("stage %d: not located purely", tc.stage)
		}
		rng := rand.New(rand.NewPCG(uint64(tc.stage), uint64(tc.budget)))
		var m pmeta
		tag := MakeTag(3, 1, 0)
		hits := 0
		for i := range 20000 {
			switch r := rng.IntN(100); {
			case r < 2: // the pool moves or changes size
				stride := 1 + rng.IntN(2)
				if err := s.SetPool(1, stride*rng.IntN(16), 2*(8+rng.IntN(40)), stride); err != nil {
					t.Fatal(err)
				}
			case r < 3: // only its stride changes
				p := j.Pool
				if err := s.SetPool(1, p.Base, p.Slots, 3-p.Stride); err != nil {
					t.Fatal(err)
				}
			case r < 4 && tc.budget > 0: // the job again, with another budget
				spec := JobSpec{ID: 3, Mask: 0xF, Group: 3, PSPort: 40, PolicyID: tc.stage, PoolID: 1, Budget: 1 + rng.IntN(min(8, j.Pool.Aggregators()))}
				if err := s.SetJob(spec); err != nil {
					t.Fatal(err)
				}
			case r < 30: // another chunk or all-reduce
				tag = MakeTag(3, uint16(1+rng.IntN(3)), uint32(rng.IntN(200)))
			}
			before := j.located
			m = pmeta{}
			m.from.job, m.from.tag, m.pkt.passes = j, tag, 1
			ok := contribution{s, &m}.locate()
			want, wok := j.stage.Locate(j, tag)
			p := j.Pool
			wok = wok && want >= p.Base && want+p.Stride <= p.Base+p.Slots
			if ok != wok || ok && m.agg.head != want {
				t.Fatalf("stage %d budget %d, step %d, tag %x in [%d,+%d) stride %d: located %d (%t), Locate says %d (%t)",
					tc.stage, tc.budget, i, uint64(tag), p.Base, p.Slots, p.Stride, m.agg.head, ok, want, wok)
			}
			if before.tag == tag && before == j.located {
				hits++
			}
		}
		if hits < 10000 {
			t.Fatalf("stage %d: %d of 20000 located from memory, want most", tc.stage, hits)
		}
	}
	s := newTestSwitch(t, 256)
	if err := s.SetPool(1, 0, 64, 1); err != nil {
		t.Fatal(err)
	}
	f, err := NewFreeINA(s, FreeINAConfig{PoolID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterStage(StageCustom, f); err != nil {
		t.Fatal(err)
	}
	if err := s.SetJob(JobSpec{ID: 4, Mask: 1, Group: 4, PSPort: 40, PolicyID: StageCustom, PoolID: 1}); err != nil {
		t.Fatal(err)
	}
	if s.jobByID(4).pure {
		t.Fatal("FreeINA's stage (leases) taken as located purely")
	}
}

// TestContentionRule: a job of a built-in contention stage, whose
// contributions go straight to contend with the job's rule (Job.rule),
// leaves every frame and the switch as the same job does through its
// stage's contribute, over random contributions of two jobs of different
// priorities that collide in a small pool: new, repeated and resent
// chunks, of current, newer and older all-reduces.
func TestContentionRule(t *testing.T) {
	for _, stage := range []int{StageStatic, StageHashed, StagePreemptive} {
		if contentionRule(newTestSwitch(t, 8).t.stages[stage]) == nil {
			t.Fatalf("stage %d: no rule", stage)
		}
		mk := func(direct bool) *Switch {
			s := newTestSwitch(t, 64)
			if err := s.SetPool(1, 0, 8, 1); err != nil {
				t.Fatal(err)
			}
			installJob(t, s, 1, 3, stage, 1, 1, 40)
			installJob(t, s, 2, 3, stage, 1, 2, 41)
			if !direct {
				s.jobByID(1).rule, s.jobByID(2).rule = nil, nil
			}
			return s
		}
		a, b := mk(true), mk(false)
		rng := rand.New(rand.NewPCG(uint64(stage), 7))
		for round := range 400 {
			var batch [][]byte
			var ports []int
			for range 1 + rng.IntN(3) { // chunks, each from most of its workers
				job, ar, chunk := uint16(1+rng.IntN(2)), uint16(1+round/40+rng.IntN(2)-rng.IntN(2)), uint32(rng.IntN(24))
				for _, w := range rng.Perm(3)[:1+rng.IntN(3)] {
					p := workerPkt(job, ar, chunk, uint8(w), []int32{int32(rng.IntN(9)), 1})
					if rng.IntN(5) == 0 {
						p.meta.Flags = inahdr.FlagResend
					}
					batch, ports = append(batch, p.build()), append(ports, w+1)
				}
			}
			fa, fb := make([]Frame, len(batch)), make([]Frame, len(batch))
			for i, d := range batch {
				fa[i] = Frame{Data: append([]byte(nil), d...), InPort: ports[i]}
				fb[i] = Frame{Data: append([]byte(nil), d...), InPort: ports[i]}
			}
			a.Process(fa)
			b.Process(fb)
			if !reflect.DeepEqual(fa, fb) {
				t.Fatalf("stage %d round %d: frames differ:\n%+v\n%+v", stage, round, fa, fb)
			}
		}
		a.jobByID(1).rule, a.jobByID(2).rule = nil, nil
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("stage %d: the switches differ after the rounds: stats %+v and %+v", stage, a.Stats(), b.Stats())
		}
		st := a.Stats()
		if contended := st.ByReason[ReasonCollision] + st.ByReason[ReasonPreempted] + st.ByReason[ReasonStale]; st.ByReason[ReasonResult] == 0 || contended == 0 {
			t.Fatalf("stage %d: the rounds gave no results or no contention: %v", stage, st.ByReason)
		}
	}
}
