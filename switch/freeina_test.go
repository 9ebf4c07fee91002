package sw

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

const fiStage = StageCustom + 5

// newFreeINASwitch: pool 1 = aggregators [0, slots) stride 1, job 1 with n
// workers in FreeINA mode, PS on port 40.
func newFreeINASwitch(t *testing.T, n, slots int) (*Switch, *FreeINA) {
	t.Helper()
	s := newTestSwitch(t, 1024)
	if err := s.SetPool(1, 0, slots, 1); err != nil {
		t.Fatal(err)
	}
	f, err := NewFreeINA(s, FreeINAConfig{PoolID: 1, LeaseIdle: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterStage(fiStage, f); err != nil {
		t.Fatal(err)
	}
	installJob(t, s, 1, n, fiStage, 1, 0, 40)
	return s, f
}

// fiRun processes frames and returns every output with the action it got.
func fiRun(t *testing.T, s *Switch, frames ...[]byte) (fwd []out, mc []out) {
	t.Helper()
	batch := make([]Frame, len(frames))
	for i, f := range frames {
		batch[i] = Frame{Data: append([]byte(nil), f...), InPort: inPortOf(f)}
	}
	s.Process(batch)
	for _, f := range batch {
		switch f.Action {
		case ActForward:
			fwd = append(fwd, out{f.OutPort, f.Data, f.Reason})
		case ActForwardMulticast:
			fwd = append(fwd, out{f.OutPort, f.Data, f.Reason})
			for _, m := range s.AppendMembers(nil, f.Group) {
				c := append([]byte(nil), f.Data...)
				s.EgressUC(c, m)
				mc = append(mc, out{m.Port, c, f.Reason})
			}
		case ActMulticast:
			t.Fatalf("FreeINA frame multicast without a PS copy")
		}
	}
	return fwd, mc
}

func checkFrame(t *testing.T, b []byte) {
	t.Helper()
	if !rdma.CheckICRC(b) {
		t.Fatal("bad ICRC")
	}
	if !rdma.IPv4ChecksumOK(b[offIP : offIP+20]) {
		t.Fatal("bad IPv4 checksum")
	}
	if int(binary.BigEndian.Uint16(b[offIP+2:])) != len(b)-offIP {
		t.Fatal("IPv4 length")
	}
}

// TestFreeINATrimAndForward: absorbed contributions reach the PS trimmed
// (same PSN, Count 0, FlagCtl), the last one with the sum, which is also
// multicast as UC SEND Only with PSN = chunk.
func TestFreeINATrimAndForward(t *testing.T) {
	s, f := newFreeINASwitch(t, 3, 64)
	if l := f.Alloc(0, 1, 7, 100, 16); l.Slots != 16 {
		t.Fatalf("grant %+v", l)
	}
	var frames [][]byte
	for w := 0; w < 3; w++ {
		p := workerPkt(1, 7, 21, uint8(w), []int32{int32(w + 1), -5, 1 << 20})
		p.psn = uint32(100 + w)
		frames = append(frames, p.build())
	}
	fwd, mc := fiRun(t, s, frames...)
	if len(fwd) != 3 || len(mc) != 3 {
		t.Fatalf("%d to PS, %d multicast", len(fwd), len(mc))
	}
	for i, o := range fwd[:2] {
		checkFrame(t, o.frame)
		if o.port != 40 || o.why != ReasonAbsorbed {
			t.Fatalf("frame %d: port %d %v", i, o.port, o.why)
		}
		h := inahdr.Header(o.frame[offBTH+rdma.BTHLen:])
		if h.Count() != 0 || h.Flags() != inahdr.FlagCtl || h.Worker() != uint8(i) || rdma.BTH(o.frame[offBTH:]).PSN() != uint32(100+i) {
			t.Fatalf("trimmed frame %d: %+v psn %d", i, h.Meta(), rdma.BTH(o.frame[offBTH:]).PSN())
		}
		if len(o.frame) != offBTH+rdma.BTHLen+inahdr.Len+rdma.ICRCLen {
			t.Fatalf("trimmed length %d", len(o.frame))
		}
	}
	m, v := resultOf(t, fwd[2])
	if fwd[2].port != 40 || m.Flags&inahdr.FlagResult == 0 || v[0] != 6 || v[1] != -15 || v[2] != 3<<20 {
		t.Fatalf("result to PS %+v %v", m, v)
	}
	for _, o := range mc {
		checkFrame(t, o.frame)
		bth := rdma.BTH(o.frame[offBTH:])
		if bth.Opcode() != rdma.OpUCSendOnly || bth.PSN() != 21 || bth.DestQP() != qpFor(1, uint8(o.port-1)) {
			t.Fatalf("UC copy to port %d: opcode %#x psn %d qp %#x", o.port, bth.Opcode(), bth.PSN(), bth.DestQP())
		}
		if mm, vv := resultOf(t, o); mm.Chunk != 21 || vv[0] != 6 {
			t.Fatalf("UC result %+v %v", mm, vv)
		}
	}
	// Retransmissions of counted contributions: the completed slot answers
	// with the result, to the PS (never re-added).
	fwd, mc = fiRun(t, s, frames[0])
	if len(fwd) != 1 || len(mc) != 0 || fwd[0].why != ReasonResent {
		t.Fatalf("retransmission after completion: %v %v", fwd, mc)
	}
	if _, v := resultOf(t, fwd[0]); v[0] != 6 {
		t.Fatalf("resent result %v", v)
	}
	// Before completion: trimmed again.
	p := workerPkt(1, 7, 22, 0, []int32{1, 1, 1}).build()
	fiRun(t, s, p)
	fwd, _ = fiRun(t, s, p)
	if len(fwd) != 1 || fwd[0].why != ReasonDuplicate || inahdr.Header(fwd[0].frame[offBTH+rdma.BTHLen:]).Count() != 0 {
		t.Fatalf("duplicate before completion: %+v", fwd)
	}
	// A newer chunk on the same aggregator (22+16) reclaims it; a late
	// retransmission of chunk 22 then goes raw to the PS.
	fiRun(t, s, workerPkt(1, 7, 38, 1, []int32{1, 1, 1}).build())
	fwd, _ = fiRun(t, s, p)
	if len(fwd) != 1 || fwd[0].why != ReasonCollision {
		t.Fatalf("stale retransmission: %+v", fwd)
	}
	if m, v := resultOf(t, fwd[0]); m.Flags&inahdr.FlagCollision == 0 || v[0] != 1 {
		t.Fatalf("raw forward %+v %v", m, v)
	}
}

// TestFreeINANoLease: without a lease, contributions go raw to the PS;
// FlagBypass packets are forwarded as plain traffic, never aggregated.
func TestFreeINANoLease(t *testing.T) {
	s, _ := newFreeINASwitch(t, 2, 64)
	if err := s.AddL2(mac(100), 40); err != nil {
		t.Fatal(err)
	}
	fwd, _ := fiRun(t, s, workerPkt(1, 1, 0, 0, []int32{5}).build())
	if len(fwd) != 1 || fwd[0].why != ReasonCollision || fwd[0].port != 40 {
		t.Fatalf("%+v", fwd)
	}
	p := workerPkt(1, 1, 0, 1, []int32{5})
	p.meta.Flags = inahdr.FlagBypass
	fwd, _ = fiRun(t, s, p.build())
	if len(fwd) != 1 || fwd[0].why != ReasonForward {
		t.Fatalf("bypass: %+v", fwd)
	}
	if st := s.Stats(); st.SlotsClaimed != 0 {
		t.Fatalf("slots claimed: %+v", st)
	}
}

// TestFreeINALeases: idempotent, partial and zero grants, FREE, idle
// expiry and reboot.
func TestFreeINALeases(t *testing.T) {
	s, f := newFreeINASwitch(t, 2, 100)
	a := f.Alloc(0, 1, 1, 1000, 60)
	if a.Slots != 60 || a.Base != 0 {
		t.Fatalf("first grant %+v", a)
	}
	if again := f.Alloc(10, 1, 1, 1000, 60); again.Base != a.Base || again.Slots != a.Slots {
		t.Fatalf("ALLOC not idempotent: %+v", again)
	}
	b := f.Alloc(0, 1, 2, 1000, 60)
	if b.Slots != 40 || b.Base != 60 {
		t.Fatalf("partial grant %+v", b)
	}
	if c := f.Alloc(0, 1, 3, 1000, 10); c.Slots != 0 {
		t.Fatalf("grant with no memory %+v", c)
	}
	f.Free(1, 2)
	if c := f.AllocExact(0, 1, 3, 1000, 50); c.Slots != 0 {
		t.Fatalf("exact grant larger than memory %+v", c)
	}
	if c := f.AllocExact(0, 1, 2, 1000, 40); c.Slots != 40 || c.Base != 60 {
		t.Fatalf("exact grant %+v", c)
	}
	// chunks of all-reduce 2 land in its lease
	fiRun(t, s, workerPkt(1, 2, 45, 0, []int32{1}).build())
	if st := s.Slot(60 + 45%40); st.State != StateClaimed || st.Owner != MakeTag(1, 2, 45) {
		t.Fatalf("slot %+v", st)
	}
	if !f.Free(1, 1) || f.Free(1, 1) {
		t.Fatal("FREE")
	}
	// all-reduce 2 stays busy (SetNow + traffic), all-reduce 4's lease idles
	d := f.Alloc(0, 1, 4, 1000, 60)
	if d.Slots != 60 || d.Base != 0 {
		t.Fatalf("grant after FREE %+v", d)
	}
	f.SetNow(900 * time.Microsecond)
	fiRun(t, s, workerPkt(1, 2, 46, 0, []int32{1}).build())
	if n := f.Expire(1100 * time.Microsecond); n != 1 {
		t.Fatalf("expired %d leases, want 1 (the idle one)", n)
	}
	if ls := f.Leases(); len(ls) != 1 || ls[0].AllReduce != 2 {
		t.Fatalf("leases %+v", ls)
	}
	if st := s.Stats(); st.SlotsClaimed != 2 {
		t.Fatalf("claimed %d", st.SlotsClaimed)
	}
	s.ResetSlots(0, s.Config().Slots) // a reboot (Node.Reset)
	f.Reset()
	if ls := f.Leases(); len(ls) != 0 {
		t.Fatalf("leases after reboot %+v", ls)
	}
	if st := s.Stats(); st.SlotsClaimed != 0 || st.SlotsFree != 1024 {
		t.Fatalf("after reboot %+v", st)
	}
	if fs := f.Stats(); fs.Expired != 1 || fs.Partial != 1 || fs.Zero != 2 || fs.Regrants != 1 || fs.Frees != 2 {
		t.Fatalf("stats %+v", fs)
	}
}

// TestFreeINAStride: leases count aggregators of a strided pool.
func TestFreeINAStride(t *testing.T) {
	s := newTestSwitch(t, 1024)
	if err := s.SetPool(1, 0, 1024, 4); err != nil {
		t.Fatal(err)
	}
	f, err := NewFreeINA(s, FreeINAConfig{PoolID: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := f.Alloc(0, 1, 1, 1000, 100)
	b := f.Alloc(0, 1, 2, 1000, 1000)
	if a.Slots != 100 || b.Slots != 156 || b.Base != 400 {
		t.Fatalf("%+v %+v", a, b)
	}
	s.Lock()
	slot, ok := f.Locate(nil, MakeTag(1, 2, 157))
	s.Unlock()
	if !ok || slot != 400+4 {
		t.Fatalf("locate %d %v", slot, ok)
	}
}

// TestFreeINAUC: contributions that arrive as UC SEND Only (the hosts' uc
// INA path) are absorbed silently; the completing one is multicast to the
// workers only; a retransmission to the completed slot gets the stored
// result back to its sender; a duplicate before completion is dropped;
// without a lease the contribution still goes raw to the PS.
func TestFreeINAUC(t *testing.T) {
	s, f := newFreeINASwitch(t, 3, 64)
	if l := f.Alloc(0, 1, 7, 100, 16); l.Slots != 16 {
		t.Fatalf("grant %+v", l)
	}
	uc := func(chunk uint32, w uint8, vals []int32) []byte {
		p := workerPkt(1, 7, chunk, w, vals)
		p.opcode = byte(rdma.OpUCSendOnly)
		return p.build()
	}
	var frames [][]byte
	for w := 0; w < 3; w++ {
		frames = append(frames, uc(21, uint8(w), []int32{int32(w + 1), -5, 1 << 20}))
	}
	if o := run(s, frames[:2]...); len(o) != 0 {
		t.Fatalf("absorbed UC contributions left the switch: %+v", o)
	}
	o := run(s, frames[2])
	if len(o) != 3 {
		t.Fatalf("completion: %d outputs", len(o))
	}
	for _, x := range o {
		checkFrame(t, x.frame)
		bth := rdma.BTH(x.frame[offBTH:])
		if x.port == 40 || bth.Opcode() != rdma.OpUCSendOnly || bth.DestQP() != qpFor(1, uint8(x.port-1)) || x.why != ReasonResult {
			t.Fatalf("UC result to port %d: opcode %#x qp %#x %v", x.port, bth.Opcode(), bth.DestQP(), x.why)
		}
		if m, v := resultOf(t, x); m.Flags&inahdr.FlagResult == 0 || m.Chunk != 21 || v[0] != 6 || v[1] != -15 || v[2] != 3<<20 {
			t.Fatalf("UC result %+v %v", m, v)
		}
	}
	// A retransmission after completion: the stored result, back to the
	// sender only.
	o = run(s, frames[1])
	if len(o) != 1 || o[0].port != 2 || o[0].why != ReasonResent {
		t.Fatalf("retransmission after completion: %+v", o)
	}
	if m, v := resultOf(t, o[0]); m.Flags&inahdr.FlagResult == 0 || v[0] != 6 || rdma.BTH(o[0].frame[offBTH:]).DestQP() != qpFor(1, 1) {
		t.Fatalf("resent result %+v %v", m, v)
	}
	// Before completion: a duplicate is dropped, never re-added.
	p := uc(22, 0, []int32{1, 1, 1})
	run(s, p)
	if o := run(s, p); len(o) != 0 {
		t.Fatalf("duplicate before completion: %+v", o)
	}
	run(s, uc(22, 1, []int32{1, 1, 1}))
	if o := run(s, uc(22, 2, []int32{1, 1, 1})); len(o) != 3 {
		t.Fatalf("chunk 22: %+v", o)
	} else if _, v := resultOf(t, o[0]); v[0] != 3 {
		t.Fatalf("chunk 22 counted twice: %v", v)
	}
	// No lease (all-reduce 8): raw to the PS, FlagCollision.
	q := workerPkt(1, 8, 0, 0, []int32{5})
	q.opcode = byte(rdma.OpUCSendOnly)
	o = run(s, q.build())
	if len(o) != 1 || o[0].port != 40 || o[0].why != ReasonCollision {
		t.Fatalf("no lease: %+v", o)
	}
	if m, v := resultOf(t, o[0]); m.Flags&inahdr.FlagCollision == 0 || v[0] != 5 || o[0].frame[offBTH] != byte(rdma.OpUCSendOnly) {
		t.Fatalf("raw forward %+v %v", m, v)
	}
}
