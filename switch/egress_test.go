package sw

import (
	"bytes"
	"testing"

	"github.com/inabox/inabox/rdma"
)

// TestEgressSealed: the egress of a replica whose ICRC is right, updated
// for its rewritten headers only, gives the bytes of a full recomputation
// (Egress, EgressUC), for every member's rewrite, RC and UC opcodes and
// value counts; so does one left without its ICRC (EgressDeferred,
// EgressUCDeferred) once sealed.
func TestEgressSealed(t *testing.T) {
	s := newTestSwitch(t, 64)
	if err := s.SetPool(1, 0, 64, 1); err != nil {
		t.Fatal(err)
	}
	installJob(t, s, 1, 8, StageHashed, 1, 0, 40)
	members := s.AppendMembers(nil, 1)
	for _, n := range []int{0, 1, 63, 64, 256} {
		vals := make([]int32, n)
		for i := range vals {
			vals[i] = int32(i*7919 - 3)
		}
		for _, op := range []byte{0x04, 0x64} { // RC, UC SEND Only
			p := workerPkt(1, 1, uint32(n*3+1), 2, vals)
			p.opcode = op
			f := p.build()
			for _, m := range members {
				want, got := append([]byte(nil), f...), append([]byte(nil), f...)
				s.Egress(want, m)
				s.EgressSealed(got, m)
				if !bytes.Equal(got, want) || !rdma.CheckICRC(got) {
					t.Fatalf("Egress, %d values, op %#x, member %v: sealed % x, full % x", n, op, m, got, want)
				}
				want, got = append([]byte(nil), f...), append([]byte(nil), f...)
				s.EgressUC(want, m)
				s.EgressUCSealed(got, m)
				if !bytes.Equal(got, want) || !rdma.CheckICRC(got) {
					t.Fatalf("EgressUC, %d values, op %#x, member %v: sealed % x, full % x", n, op, m, got, want)
				}
				// Deferred: every byte but the ICRC, which SealICRC writes.
				got = append([]byte(nil), f...)
				s.EgressUCDeferred(got, m)
				rdma.SealICRC(got)
				if !bytes.Equal(got, want) {
					t.Fatalf("EgressUC, %d values, op %#x, member %v: deferred % x, full % x", n, op, m, got, want)
				}
				want, got = append([]byte(nil), f...), append([]byte(nil), f...)
				s.Egress(want, m)
				s.EgressDeferred(got, m)
				rdma.SealICRC(got)
				if !bytes.Equal(got, want) {
					t.Fatalf("Egress, %d values, op %#x, member %v: deferred % x, full % x", n, op, m, got, want)
				}
			}
		}
	}
}

// TestParseSealed: the pipeline trusts the ICRC of a sealed frame and
// checks an unsealed one's; a result it rewrites for multicast leaves it
// unsealed (Egress writes each replica's ICRC).
func TestParseSealed(t *testing.T) {
	for _, sealed := range []bool{false, true} {
		s := newTestSwitch(t, 64)
		if err := s.SetPool(1, 0, 64, 1); err != nil {
			t.Fatal(err)
		}
		installJob(t, s, 1, 2, StageHashed, 1, 0, 40)
		var batch []Frame
		for w := uint8(0); w < 2; w++ {
			f := workerPkt(1, 1, 0, w, []int32{1, 2, 3, 4}).build()
			f[len(f)-1] ^= 0x80 // a wrong ICRC
			batch = append(batch, Frame{Data: f, InPort: int(w) + 1, Sealed: sealed})
		}
		s.Process(batch)
		for i, f := range batch {
			switch {
			case !sealed && f.Reason != ReasonBadICRC:
				t.Fatalf("unsealed frame %d with a wrong ICRC: %v, want %v", i, f.Reason, ReasonBadICRC)
			case sealed && f.Reason == ReasonBadICRC:
				t.Fatalf("sealed frame %d: dropped for its ICRC", i)
			case sealed && i == 1 && (f.Action != ActMulticast || f.Sealed):
				t.Fatalf("the result: action %v, sealed %v; want multicast, unsealed", f.Action, f.Sealed)
			}
		}
	}
}
