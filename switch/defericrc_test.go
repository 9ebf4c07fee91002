package sw

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/inabox/inabox/rdma"
)

// TestDeferICRC: a frame the pipeline rewrites and forwards (ATP's and
// ESA's results to the PS, FreeINA's contributions to the PS, trimmed or
// not) is left without its ICRC when the caller defers it (DeferICRC), and
// SealICRC then writes the bytes the pipeline writes itself; every other
// part of the verdict is the same.
func TestDeferICRC(t *testing.T) {
	type setup struct {
		name string
		make func(t *testing.T) *Switch
	}
	atpLike := func(stage int) func(t *testing.T) *Switch {
		return func(t *testing.T) *Switch {
			s := newTestSwitch(t, 64)
			if err := s.SetPool(1, 0, 8, 1); err != nil {
				t.Fatal(err)
			}
			installJob(t, s, 1, 3, stage, 1, 1, 40)
			if err := s.SetJob(JobSpec{ID: 1, Mask: 0x7, Group: 1, PSPort: 40, ResultToPS: true, Priority: 1, PolicyID: stage, PoolID: 1}); err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	for _, c := range []setup{
		{"hashed", atpLike(StageHashed)},
		{"preemptive", atpLike(StagePreemptive)},
		{"freeina", func(t *testing.T) *Switch {
			s, f := newFreeINASwitch(t, 3, 8)
			if l := f.Alloc(0, 1, 1, 64, 8); l.Slots != 8 {
				t.Fatalf("grant %+v", l)
			}
			return s
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			plain, deferring := c.make(t), c.make(t)
			r := rand.New(rand.NewPCG(3, 4))
			deferred := 0
			for chunk := uint32(0); chunk < 24; chunk++ {
				var batch, batchD []Frame
				for w := uint8(0); w < 3; w++ {
					p := workerPkt(1, 1, chunk, w, randVals(r, 8, 1000))
					p.psn = chunk
					f := p.build()
					batch = append(batch, Frame{Data: append([]byte(nil), f...), InPort: int(w) + 1})
					batchD = append(batchD, Frame{Data: append([]byte(nil), f...), InPort: int(w) + 1, DeferICRC: true})
				}
				plain.SetNow(time.Duration(chunk) * time.Microsecond)
				deferring.SetNow(time.Duration(chunk) * time.Microsecond)
				plain.Process(batch)
				deferring.Process(batchD)
				for i := range batch {
					a, b := batch[i], batchD[i]
					if a.Action != b.Action || a.OutPort != b.OutPort || a.Reason != b.Reason || a.Len != b.Len || a.Deferred {
						t.Fatalf("chunk %d frame %d: %+v against %+v", chunk, i, a, b)
					}
					if !b.Deferred {
						if a.Sealed != b.Sealed || !bytes.Equal(a.Data, b.Data) {
							t.Fatalf("chunk %d frame %d: not deferred, and not the same", chunk, i)
						}
						continue
					}
					deferred++
					if b.Sealed || !a.Sealed {
						t.Fatalf("chunk %d frame %d: deferred with Sealed %v (%v without)", chunk, i, b.Sealed, a.Sealed)
					}
					rdma.SealICRC(b.Data)
					if !bytes.Equal(a.Data, b.Data) || !rdma.CheckICRC(b.Data) {
						t.Fatalf("chunk %d frame %d: sealed later, % x; at once, % x", chunk, i, b.Data, a.Data)
					}
				}
			}
			if deferred == 0 {
				t.Fatal("no frame was deferred")
			}
			t.Logf("%d frames deferred", deferred)
		})
	}
}
