package sw

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/inabox/inabox/switch/inahdr"
)

// TestNoDoubleCountingUnderContention: two jobs share a tiny pool, so
// collisions, reclaims and (with Preemptive) preemptions are frequent;
// workers send every contribution 1-3 times in random order, late
// duplicates included. Every aggregate the switch produces (results,
// preempted partials, and what is left in a slot at the end) must equal the
// sum of exactly the workers in its bitmap: a duplicate is never added into
// an aggregate that already holds that worker. Results carry every worker.
//
// What the switch cannot promise (and this test therefore does not check):
// once a chunk's aggregator has been completed or preempted and then taken
// by another chunk, the switch has no memory of it, so a late duplicate of
// that chunk starts a new aggregate of the same chunk. It is exact for its
// own bitmap; hosts and the PS drop it by (job, all-reduce, chunk), as in
// ATP and ESA. SwitchML avoids it by keeping the window at most half the
// pool (shadow copies).
//
// With ResultToPS (ATP; toPS below) results go to the PS, which ACKs each
// at a random later point, and the repeats are retransmissions
// (FlagResend): a repeat finding its chunk partial forces the sum out
// (ReasonForced), which must be exact for its bitmap too.
func TestNoDoubleCountingUnderContention(t *testing.T) {
	type variant struct {
		pol  int
		toPS bool
	}
	for _, vt := range []variant{{StageHashed, false}, {StagePreemptive, false}, {StageStatic, false}, {StageHashed, true}, {StagePreemptive, true}} {
		pol, toPS := vt.pol, vt.toPS
		t.Run(fmt.Sprint(pol, toPS), func(t *testing.T) {
			seed := uint64(7)
			if toPS {
				seed = 9
			}
			r := rand.New(rand.NewPCG(uint64(pol), seed))
			const nw, chunks, nv = 4, 24, 8
			s := newTestSwitch(t, 64)
			s.SetPool(1, 0, 3, 1)
			s.SetPool(2, 3, 3, 1)
			pool2 := uint16(1)
			if pol == StageStatic {
				pool2 = 2 // static pools are per job
			}
			installJob(t, s, 1, nw, pol, 1, 1, 40)
			ps2 := 41
			if toPS {
				ps2 = 40
				if err := s.AddWorker(WorkerEntry{Port: 40, QP: qpFor(2, 0xFF), Job: 2, PS: true}); err != nil {
					t.Fatal(err)
				}
				if err := s.SetJob(JobSpec{ID: 1, Mask: 0xF, Group: 1, PSPort: 40, ResultToPS: true, Priority: 1, PolicyID: pol, PoolID: 1}); err != nil {
					t.Fatal(err)
				}
			}
			var members []McastMember
			for w := 0; w < nw; w++ { // job 2 on ports 5..8
				s.AddWorker(WorkerEntry{Port: 5 + w, QP: qpFor(2, uint8(w)), Job: 2, Worker: uint8(w), RID: 200 + uint16(w)})
				members = append(members, McastMember{RID: 200 + uint16(w), Port: 5 + w})
			}
			s.AddMcastGroup(2, members...)
			if err := s.SetJob(JobSpec{ID: 2, Mask: 0xF, Group: 2, PSPort: ps2, ResultToPS: toPS, Priority: 3, PolicyID: pol, PoolID: pool2}); err != nil {
				t.Fatal(err)
			}
			vals := map[Tag][][]int32{}
			var frames []Frame
			for job := uint16(1); job <= 2; job++ {
				for c := uint32(0); c < chunks; c++ {
					tag := MakeTag(job, 1, c)
					for w := 0; w < nw; w++ {
						v := randVals(r, nv, 1000)
						vals[tag] = append(vals[tag], v)
						p := workerPkt(job, 1, c, uint8(w), v)
						f := p.build()
						p.meta.Flags = inahdr.FlagResend
						re := p.build()
						port := w + 1
						if job == 2 {
							port = 5 + w
						}
						for k := 0; k <= r.IntN(3); k++ {
							if k > 0 && toPS {
								f = re
							}
							frames = append(frames, Frame{Data: append([]byte(nil), f...), InPort: port})
						}
					}
				}
			}
			r.Shuffle(len(frames), func(i, j int) { frames[i], frames[j] = frames[j], frames[i] })
			counted := map[Tag]uint32{}
			check := func(tag Tag, bitmap uint32, got []int32, what string) {
				t.Helper()
				if what == "result" && bitmap != 0xF {
					t.Fatalf("%v result with bitmap %#x", tag, bitmap)
				}
				counted[tag] |= bitmap
				for i := 0; i < nv; i++ {
					var want int32
					for w := 0; w < nw; w++ {
						if bitmap&(1<<w) != 0 {
							want += vals[tag][w][i]
						}
					}
					if got[i] != want {
						t.Fatalf("%v %s bitmap %#x: value %d = %d want %d", tag, what, bitmap, i, got[i], want)
					}
				}
			}
			seen := map[Tag]bool{}
			for len(frames) > 0 {
				k := min(len(frames), 1+r.IntN(16))
				batch := frames[:k]
				frames = frames[k:]
				s.Process(batch)
				for _, f := range batch {
					if f.Action == ActDrop {
						continue
					}
					m, v, err := inahdr.Decode(f.Data[54:])
					if err != nil {
						t.Fatal(err)
					}
					tag := MakeTag(m.Job, m.AllReduce, m.Chunk)
					switch {
					case f.Reason == ReasonResult:
						seen[tag] = true
						check(tag, m.Bitmap, v, "result")
					case f.Reason == ReasonPreempted:
						check(tag, m.Bitmap, v, "partial")
					case f.Reason == ReasonForced:
						check(tag, m.Bitmap, v, "forced")
					}
					if toPS && (f.Reason == ReasonResult || f.Reason == ReasonForced) {
						// the PS ACKs it somewhere later
						k := r.IntN(len(frames) + 1)
						ack := Frame{Data: psAck(m.Job, m.AllReduce, m.Chunk, make([]int32, nv)), InPort: 40}
						frames = append(frames[:k], append([]Frame{ack}, frames[k:]...)...)
					}
				}
			}
			for i := 0; i < 6; i++ { // what is still in the slots
				si := s.Slot(i)
				if si.State == StateClaimed {
					check(si.Owner, si.Bitmap, s.Values(nil, i)[:nv], "stuck")
				}
			}
			st := s.Stats()
			t.Logf("stage %d: results %d (chunks %d) collisions %d preempted %d forced %d duplicates %d acks %d", pol,
				st.ByReason[ReasonResult], len(seen), st.ByReason[ReasonCollision], st.ByReason[ReasonPreempted],
				st.ByReason[ReasonForced], st.ByReason[ReasonDuplicate], st.ByReason[ReasonAck])
			if st.ByReason[ReasonResult] == 0 || st.ByReason[ReasonCollision] == 0 || toPS && st.ByReason[ReasonForced] == 0 {
				t.Fatalf("scenario too easy: %+v", st.ByReason)
			}
		})
	}
}
