package sw

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// TestTrace drives every slot stage with random traffic (contributions in
// and out of order, duplicates, retransmissions, multi-pass packets,
// overflow, PS results, foreign and malformed frames, plain traffic, UC and
// RC FreeINA contributions, lease changes, job changes between batches) and
// hashes everything the switch does: each frame's verdict and bytes, every
// multicast replica after Egress/EgressUC, and at the end all counters,
// registers and leases. The digests are in testdata/trace.sha256
// (go test ./switch -run TestTrace -update rewrites it): any change in the
// data plane's behaviour changes them.
func TestTrace(t *testing.T) {
	const path = "testdata/trace.sha256"
	var b strings.Builder
	for seed := uint64(1); seed <= 8; seed++ {
		fmt.Fprintf(&b, "%d %s\n", seed, traceRun(t, seed))
	}
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != b.String() {
		t.Fatalf("trace digests differ:\ngot\n%swant\n%s", b.String(), want)
	}
}

// traceJob is one job of the trace: its workers sit on ports port..port+n-1.
type traceJob struct {
	id, pool  uint16
	n, port   int
	ps        int
	stage     int
	prio      uint8
	toPS      bool
	freeINA   bool
	next      uint32 // next new chunk
	ar        uint16
	maxCount  int
	ucPercent int
}

func traceRun(t *testing.T, seed uint64) string {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 0x7ace))
	s, err := New(Config{Slots: 512, ValuesPerPass: 8, MaxPasses: 3, Ports: 64})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ id, base, slots, stride int }{
		{1, 0, 48, 1}, {2, 64, 96, 3}, {3, 256, 64, 1}, {4, 320, 8, 1}, {5, 384, 24, 3},
	} {
		if err := s.SetPool(uint16(p.id), p.base, p.slots, p.stride); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := NewFreeINA(s, FreeINAConfig{PoolID: 3, LeaseIdle: 50 * time.Microsecond, MaxLease: 12})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterStage(StageCustom, fi); err != nil {
		t.Fatal(err)
	}
	jobs := []*traceJob{
		{id: 1, pool: 1, n: 3, port: 1, ps: 40, stage: StageStatic, maxCount: 8},
		{id: 2, pool: 2, n: 2, port: 4, ps: 41, stage: StageHashed, maxCount: 24},
		{id: 3, pool: 2, n: 2, port: 6, ps: 42, stage: StageHashed, toPS: true, maxCount: 20},
		{id: 4, pool: 2, n: 2, port: 8, ps: 43, stage: StagePreemptive, prio: 1, maxCount: 24},
		{id: 5, pool: 2, n: 3, port: 10, ps: 44, stage: StagePreemptive, prio: 5, toPS: true, maxCount: 24},
		{id: 6, pool: 3, n: 4, port: 13, ps: 45, stage: StageCustom, freeINA: true, maxCount: 8, ucPercent: 50},
		{id: 7, pool: 4, n: 2, port: 17, ps: 46, stage: StageHashed, maxCount: 8},
		{id: 8, pool: 5, n: 1, port: 19, ps: 47, stage: StageStatic, maxCount: 24},
		{id: 9, pool: 3, n: 2, port: 20, ps: 48, stage: StageCustom, freeINA: true, maxCount: 8},
	}
	for _, j := range jobs {
		traceInstall(t, s, j)
	}
	if err := s.AddL2(mac(200), 50); err != nil {
		t.Fatal(err)
	}
	if err := s.AddRoute(netipPrefix("10.9.0.0/16"), 51); err != nil {
		t.Fatal(err)
	}
	hs := sha256.New()
	now := time.Duration(0)
	var reboots uint64
	for round := 0; round < 300; round++ {
		now += time.Duration(r.IntN(20)) * time.Microsecond
		traceControl(t, r, s, fi, jobs, now, &reboots)
		batch := make([]Frame, 1+r.IntN(40))
		for i := range batch {
			batch[i] = traceFrame(r, jobs)
		}
		s.Process(batch)
		for i := range batch {
			traceHashFrame(hs, s, &batch[i])
		}
	}
	st := s.Stats()
	if testing.Verbose() {
		for i, n := range st.ByReason {
			t.Logf("seed %d %v %d", seed, Reason(i), n)
		}
		for id := uint16(1); id < 10; id++ {
			ps, _ := s.PoolStats(id)
			t.Logf("seed %d pool %d %+v", seed, id, ps)
		}
		t.Logf("seed %d freeina %+v", seed, fi.Stats())
	}
	fmt.Fprintf(hs, "%+v\n", st)
	for p := 0; p < 64; p++ {
		fmt.Fprintf(hs, "port %d %+v\n", p, s.PortStats(p))
	}
	for id := uint16(0); id < 12; id++ {
		js, ok := s.JobStats(id)
		fmt.Fprintf(hs, "job %d %v %+v\n", id, ok, js)
		ps, ok := s.PoolStats(id)
		fmt.Fprintf(hs, "pool %d %v %s\n", id, ok, tracePoolStats(ps))
	}
	for i := 0; i < 512; i++ {
		fmt.Fprintf(hs, "slot %d %+v %v\n", i, s.Slot(i), s.Values(nil, i))
	}
	fmt.Fprintf(hs, "freeina %s %+v\n", traceFreeINAStats(fi.Stats(), reboots), fi.Leases())
	return hex.EncodeToString(hs.Sum(nil))
}

// tracePoolStats formats st as %+v did before PoolStats counted
// ReclaimsHeld, so the trace's hash stands; the trace sets no
// JobSpec.ReclaimHeld, and a nonzero count would show (and change it).
func tracePoolStats(st PoolStats) string {
	s := fmt.Sprintf("{Claims:%d Reclaims:%d Collisions:%d Preemptions:%d Completions:%d Releases:%d CollisionsOnHeld:%d}",
		st.Claims, st.Reclaims, st.Collisions, st.Preemptions, st.Completions, st.Releases, st.CollisionsOnHeld)
	if st.ReclaimsHeld != 0 {
		s += fmt.Sprintf(" ReclaimsHeld:%d", st.ReclaimsHeld)
	}
	return s
}

// traceFreeINAStats formats st as %+v did when FreeINAStats also counted
// reboots and bad control frames (now NodeStats), so the trace's hash
// stands: CtlBad was 0, as the trace runs no node.
func traceFreeINAStats(st FreeINAStats, reboots uint64) string {
	return fmt.Sprintf("{Allocs:%d Grants:%d Partial:%d Zero:%d Regrants:%d Frees:%d Expired:%d Reboots:%d CtlBad:0}",
		st.Allocs, st.Grants, st.Partial, st.Zero, st.Regrants, st.Frees, st.Expired, reboots)
}

func traceInstall(t *testing.T, s *Switch, j *traceJob) {
	t.Helper()
	var members []McastMember
	for w := 0; w < j.n; w++ {
		rid := j.id*100 + uint16(w)
		if err := s.AddWorker(WorkerEntry{Port: j.port + w, QP: qpFor(j.id, uint8(w)), Job: j.id, Worker: uint8(w), RID: rid}); err != nil {
			t.Fatal(err)
		}
		// the UC QP of the worker
		if err := s.AddWorker(WorkerEntry{Port: j.port + w, QP: qpFor(j.id, uint8(w)) | 0x80000, Job: j.id, Worker: uint8(w), RID: rid}); err != nil {
			t.Fatal(err)
		}
		members = append(members, McastMember{RID: rid, Port: j.port + w})
		s.SetRewrite(rid, Rewrite{SrcMAC: mac(100), DstMAC: mac(uint8(j.port + w)), SrcIP: ip(100), DstIP: ip(uint8(j.port + w)), DstQP: qpFor(j.id, uint8(w))})
	}
	s.SetRewrite(900+j.id, Rewrite{SrcMAC: mac(100), DstMAC: mac(uint8(j.ps)), SrcIP: ip(100), DstIP: ip(uint8(j.ps)), DstQP: 0xC7C7C7})
	if err := s.AddWorker(WorkerEntry{Port: j.ps, QP: qpFor(j.id, 0xFF), Job: j.id, PS: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddMcastGroup(j.id, members...); err != nil {
		t.Fatal(err)
	}
	traceSetJob(t, s, j)
}

func traceSetJob(t *testing.T, s *Switch, j *traceJob) {
	t.Helper()
	mask := uint32(1)<<j.n - 1
	if err := s.SetJob(JobSpec{ID: j.id, Mask: mask, Group: j.id, PSPort: j.ps, ResultToPS: j.toPS,
		Priority: j.prio, PolicyID: j.stage, PoolID: j.pool}); err != nil {
		t.Fatal(err)
	}
}

// traceControl changes the control plane between batches.
func traceControl(t *testing.T, r *rand.Rand, s *Switch, fi *FreeINA, jobs []*traceJob, now time.Duration, reboots *uint64) {
	fi.SetNow(now)
	switch x := r.IntN(100); {
	case x < 8: // a FreeINA all-reduce starts
		j := jobs[[]int{5, 8}[r.IntN(2)]]
		j.ar++
		want := r.IntN(10)
		if r.IntN(4) == 0 {
			fi.AllocExact(now, j.id, j.ar, uint32(4+r.IntN(40)), want)
		} else {
			fi.Alloc(now, j.id, j.ar, uint32(4+r.IntN(40)), want)
		}
	case x < 11:
		j := jobs[5]
		fi.Free(j.id, j.ar-uint16(r.IntN(2)))
	case x < 13:
		fi.Expire(now)
	case x < 14: // a reboot, as Node.Reset does it
		s.ResetSlots(0, s.Config().Slots)
		fi.Reset()
		*reboots++
	case x < 16:
		s.ResetSlots(r.IntN(512), r.IntN(40))
	case x < 18: // priority or result routing changes
		j := jobs[1+r.IntN(4)]
		j.prio = uint8(r.IntN(8))
		j.toPS = r.IntN(2) == 0
		traceSetJob(t, s, j)
	case x < 19:
		s.RemoveJob(jobs[6].id)
		s.RemoveJob(jobs[3].id)
	case x < 20:
		traceSetJob(t, s, jobs[6])
		traceSetJob(t, s, jobs[3])
	}
}

// traceFrame builds one random frame.
func traceFrame(r *rand.Rand, jobs []*traceJob) Frame {
	x := r.IntN(100)
	switch {
	case x < 3: // plain traffic: l2 hit, route hit, miss
		p := workerPkt(1, 1, 0, 0, nil)
		switch r.IntN(3) {
		case 0:
			p.dstMAC = mac(200)
		case 1:
			p.dst = netipAddrT4(10, 9, 1, 1)
		}
		d := p.build()
		d[offUDP+2] = 0x13 // not RoCE
		return Frame{Data: d, InPort: 1 + r.IntN(30)}
	case x < 5: // malformed or foreign
		j := jobs[r.IntN(len(jobs))]
		p := workerPkt(j.id, 1, j.next, 0, []int32{1, 2})
		d := p.build()
		switch r.IntN(4) {
		case 0:
			d[54] = 9 // version
		case 1:
			inahdr.Header(d[54:]).SetWorker(7)
		case 2:
			d[offBTH+7] ^= 0x55 // unknown QP
		case 3:
			inahdr.Header(d[54:]).SetCount(9) // more values than the frame holds
		}
		return Frame{Data: d, InPort: j.port + r.IntN(2)}
	}
	j := jobs[r.IntN(len(jobs))]
	if x < 12 { // from the PS: a result (ACK) or plain
		back := uint32(r.IntN(8))
		c := uint32(0)
		if j.next > back {
			c = j.next - back
		}
		meta := inahdr.Meta{Flags: inahdr.FlagFromPS, Job: j.id, AllReduce: j.ar, Chunk: c, Worker: 0, Bitmap: uint32(1)<<j.n - 1}
		if r.IntN(4) != 0 {
			meta.Flags |= inahdr.FlagResult
		}
		if j.freeINA && r.IntN(2) == 0 {
			meta.AllReduce = 1
		}
		p := pkt{srcMAC: mac(100), dstMAC: mac(1), src: ip(100), dst: ip(1), qp: qpFor(j.id, 0xFF), opcode: 0x04,
			meta: meta, vals: traceVals(r, 1+r.IntN(j.maxCount))}
		return Frame{Data: p.build(), InPort: j.ps}
	}
	// a contribution: a recent chunk (often the newest, sometimes older)
	var c uint32
	switch y := r.IntN(10); {
	case y < 3:
		c = j.next
		if r.IntN(2) == 0 {
			j.next++
		}
	default:
		back := uint32(r.IntN(6))
		if j.next >= back {
			c = j.next - back
		}
	}
	w := uint8(r.IntN(j.n))
	ar := uint16(1)
	if j.freeINA {
		ar = j.ar - uint16(r.IntN(2))
	}
	p := workerPkt(j.id, ar, c, w, traceVals(r, 1+r.IntN(j.maxCount)))
	p.meta.Exponent = int8(r.IntN(5) - 2)
	p.opcode = []byte{0x04, 0x05, 0x0A, 0x0B, byte(rdma.OpUCSendOnly)}[r.IntN(5)]
	if j.freeINA && r.IntN(100) < j.ucPercent {
		p.opcode = byte(rdma.OpUCSendOnly)
		p.qp |= 0x80000
	}
	if r.IntN(40) == 0 {
		p.meta.Flags |= inahdr.FlagOverflow
	}
	if r.IntN(60) == 0 {
		p.vals = traceVals(r, 30) // too long
	}
	p.psn = r.Uint32() & 0xFFFFFF
	d := p.build()
	if r.IntN(50) == 0 {
		d[len(d)-1] ^= 1 // bad ICRC: damaged past the FCS, the switch drops it
	}
	return Frame{Data: d, InPort: j.port + int(w)}
}

func traceVals(r *rand.Rand, n int) []int32 {
	v := make([]int32, n)
	big := r.IntN(10) == 0
	for i := range v {
		if big {
			v[i] = int32(r.Uint32())
		} else {
			v[i] = int32(r.IntN(2001) - 1000)
		}
	}
	return v
}

func traceHashFrame(hs hash.Hash, s *Switch, f *Frame) {
	var hd [16]byte
	hd[0] = byte(f.Action)
	binary.BigEndian.PutUint32(hd[1:], uint32(int32(f.OutPort)))
	binary.BigEndian.PutUint16(hd[5:], f.Group)
	hd[7] = byte(f.Reason)
	hd[8] = byte(f.Passes)
	binary.BigEndian.PutUint32(hd[9:], uint32(f.Len))
	binary.BigEndian.PutUint16(hd[13:], uint16(len(f.Data)))
	hs.Write(hd[:])
	hs.Write(f.Data)
	switch f.Action {
	case ActMulticast, ActForwardMulticast:
		for _, m := range s.AppendMembers(nil, f.Group) {
			c := append([]byte(nil), f.Data...)
			if f.Action == ActMulticast {
				s.Egress(c, m)
			} else {
				s.EgressUC(c, m)
			}
			fmt.Fprintf(hs, "%d %d ", m.RID, m.Port)
			hs.Write(c)
		}
	}
}
