package sw

import (
	"fmt"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// smlFrame is control message m from worker rank of job (on its own
// addresses) to the switch's control QP.
func smlFrame(job uint16, rank uint8, m inahdr.Ctl) []byte {
	p := workerPkt(job, 0, 0, rank, nil)
	p.srcMAC, p.src = mac(byte(10*job)+rank), ip(byte(10*job)+rank)
	p.opcode, p.qp, p.meta = byte(rdma.OpUCSendOnly), DefaultCtlQPN, m.Meta()
	return p.build()
}

// TestSwitchMLControl: SwitchML's controller in the switch node, with 16
// aggregators and three jobs of two workers, each asking for 12. Job 1
// JOINs alone and gets 12 (a GRANT to both its workers); job 2 JOINs while
// job 1 holds its pool: its share is 16 ÷ 2 jobs present, and it gets the
// 4 left; job 3 finds nothing free and waits, its repeated JOIN
// unanswered. One LEAVE of job 1 releases nothing; the second releases its
// pool (job entry removed, slots cleared, LEFT to its workers) and admits
// job 3 with its share of 8, at slot 0. A repeated LEAVE gets LEFT again.
// JOINs from a port that is not the worker's, or of a rank the job lacks,
// are foreign.
func TestSwitchMLControl(t *testing.T) {
	const us = time.Microsecond
	s, sc := newSML(t, 16, 8)
	join := func(job uint16, r uint8) []byte {
		return smlFrame(job, r, inahdr.Ctl{Op: inahdr.CtlJoin, Job: job, Rank: int(r), Want: 12})
	}
	leave := func(job uint16, r uint8) []byte {
		return smlFrame(job, r, inahdr.Ctl{Op: inahdr.CtlLeave, Job: job, Rank: int(r)})
	}
	port := smlPort
	sends := map[int][]timedFrame{
		port(1, 0): {{1 * us, join(1, 0)}, {40 * us, leave(1, 0)}, {70 * us, leave(1, 0)}},
		port(1, 1): {{1 * us, join(1, 1)}, {50 * us, leave(1, 1)}},
		port(2, 0): {{10 * us, join(2, 0)}},
		port(3, 0): {{20 * us, join(3, 0)}, {30 * us, join(3, 0)}},
		// Forged: job 2's rank 1 from job 3's rank 1 port; job 1's rank 5.
		port(3, 1): {{25 * us, join(2, 1)}, {26 * us, join(1, 5)}},
	}
	net, node, hosts := smlNet(t, s, sc, 3, port, sends)
	got := func(j uint16, r uint8) []string {
		p := port(j, r)
		var out []string
		for _, m := range grantsIn(t, fmt.Sprintf("job %d rank %d", j, r), hosts[p].got, 0x500000+uint32(p)) {
			out = append(out, m.String())
		}
		return out
	}
	// Before job 1 leaves: pools 1 and 2 installed, job 3 waiting.
	if _, err := net.RunUntil(35 * us); err != nil {
		t.Fatal(err)
	}
	pools := sc.Pools()
	if len(pools) != 2 || pools[0].Job != 1 || pools[0].Base != 0 || pools[0].Aggregators != 12 ||
		pools[1].Job != 2 || pools[1].Base != 12 || pools[1].Aggregators != 4 {
		t.Fatalf("pools at 35 µs: %+v", pools)
	}
	if w := sc.Waiting(); len(w) != 1 || w[0] != 3 {
		t.Fatalf("waiting: %v", w)
	}
	if j := s.jobByID(2); j == nil || j.Pool.Base != 12 || j.Pool.Slots != 4 || j.PolicyID != StageStatic {
		t.Fatalf("job 2 entry: %+v", j)
	}
	if s.jobByID(3) != nil {
		t.Fatal("job 3 installed while waiting")
	}
	// Job 1's pool has state the release must clear.
	s.r.agg[5].owner, s.r.agg[5].count = 7, 1
	if _, err := net.RunUntil(200 * us); err != nil {
		t.Fatal(err)
	}
	// Job 1: GRANT per JOIN (two), then LEFT per LEAVE after the release.
	for r := uint8(0); r < 2; r++ {
		want := []string{"GRANT job=1 allreduce=0 chunks=0 slots=12 base=0", "GRANT job=1 allreduce=0 chunks=0 slots=12 base=0",
			"LEFT job=1 allreduce=0", "LEFT job=1 allreduce=0"}
		if g := got(1, r); fmt.Sprint(g) != fmt.Sprint(want) {
			t.Errorf("job 1 rank %d got %q, want %q", r, g, want)
		}
	}
	for r := uint8(0); r < 2; r++ {
		if g := got(2, r); fmt.Sprint(g) != fmt.Sprint([]string{"GRANT job=2 allreduce=0 chunks=0 slots=4 base=12"}) {
			t.Errorf("job 2 rank %d got %q", r, g)
		}
		// Job 3: one GRANT, when job 1 left, not before (its second JOIN
		// came while it waited).
		g := grantsIn(t, "job 3", hosts[port(3, r)].got, 0x500000+uint32(port(3, r)))
		if len(g) != 1 || g[0].String() != "GRANT job=3 allreduce=0 chunks=0 slots=8 base=0" {
			t.Errorf("job 3 rank %d got %v", r, g)
		}
		for _, f := range hosts[port(3, r)].got {
			if h := inahdr.Header(f.frame[offBTH+rdma.BTHLen:]); h.IsCtl() && f.at < 50*us {
				t.Errorf("job 3 rank %d: control frame at %v, before job 1 left", r, f.at)
			}
		}
	}
	if s.jobByID(1) != nil {
		t.Error("job 1 still installed")
	}
	if si := s.Slot(5); si.Owner != 0 || si.Count != 0 {
		t.Errorf("slot 5 not cleared: %+v", si)
	}
	if j := s.jobByID(3); j == nil || j.Pool.Base != 0 || j.Pool.Slots != 8 {
		t.Fatalf("job 3 entry: %+v", j)
	}
	if _, ok := s.JobStats(1); !ok {
		t.Error("job 1's counters gone with its entry")
	}
	st := sc.Stats()
	if st.Joins != 5 || st.Leaves != 3 || st.Admitted != 3 || st.Waited != 1 || st.Released != 1 || st.Unknown != 0 {
		t.Errorf("stats %+v", st)
	}
	if f := node.Stats().CtlForeign; f != 2 {
		t.Errorf("foreign control frames: %d, want 2", f)
	}
	if sc.Err() != nil {
		t.Fatal(sc.Err())
	}
}

// TestSwitchMLControlConfig: memory outside the switch, or too small for
// the smallest pool, is refused; a job needs an id and 1–32 workers.
func TestSwitchMLControlConfig(t *testing.T) {
	s, err := New(Config{Slots: 16, Ports: 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSwitchMLControl(s, SwitchMLConfig{Base: 8, Slots: 16}); err == nil {
		t.Error("memory past the switch accepted")
	}
	// Memory below the smallest pool: no job could start.
	if _, err := NewSwitchMLControl(s, SwitchMLConfig{Slots: 1}); err == nil {
		t.Error("1 aggregator accepted (the smallest pool is 2)")
	}
	if _, err := NewSwitchMLControl(s, SwitchMLConfig{Slots: 7, Stride: 2, MinAggregators: 4}); err == nil {
		t.Error("3 aggregators accepted with MinAggregators 4")
	}
	if _, err := NewSwitchMLControl(s, SwitchMLConfig{Slots: 2}); err != nil {
		t.Errorf("2 aggregators refused: %v", err)
	}
	sc, err := NewSwitchMLControl(s, SwitchMLConfig{Slots: 16, Stride: 2})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Aggregators() != 8 {
		t.Errorf("aggregators %d", sc.Aggregators())
	}
	for _, j := range []SwitchMLJob{{Workers: 2}, {Spec: JobSpec{ID: 1}}, {Spec: JobSpec{ID: 1}, Workers: 33}} {
		if err := sc.AddJob(j); err == nil {
			t.Errorf("job %+v accepted", j)
		}
	}
}

// newSML returns a switch of aggs slots and ports ports and a SwitchML
// controller over all of it.
func newSML(t *testing.T, aggs, ports int) (*Switch, *SwitchMLControl) {
	t.Helper()
	s, err := New(Config{Slots: aggs, Ports: ports})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := NewSwitchMLControl(s, SwitchMLConfig{Slots: aggs, Stride: 1})
	if err != nil {
		t.Fatal(err)
	}
	return s, sc
}

// smlPort is worker r of job j's port in these tests: 2(j−1)+r+1.
func smlPort(j uint16, r uint8) int { return 2*int(j-1) + int(r) + 1 }

// smlNet puts s with controller sc on a network with jobs jobs of two
// workers each (worker r of job j on port(j, r)), each sending its sends.
func smlNet(t *testing.T, s *Switch, sc *SwitchMLControl, jobs uint16, port func(uint16, uint8) int,
	sends map[int][]timedFrame) (*emu.Network, *Node, map[int]*scriptNode) {
	t.Helper()
	net := emu.NewNetwork(emu.Config{Seed: 1})
	node := NewTimedNode(s, NodeConfig{PassTime: time.Nanosecond, Latency: 100 * time.Nanosecond, Control: sc, Addr: testSwitchAddr})
	if err := net.AddNode("sw", s.Config().Ports, node); err != nil {
		t.Fatal(err)
	}
	hosts := map[int]*scriptNode{}
	for j := uint16(1); j <= jobs; j++ {
		var members []McastMember
		for r := uint8(0); r < 2; r++ {
			p := port(j, r)
			rid := uint16(p)
			if err := s.AddWorker(WorkerEntry{Port: p, QP: qpFor(j, r), Job: j, Worker: r, RID: rid}); err != nil {
				t.Fatal(err)
			}
			s.SetRewrite(rid, Rewrite{SrcMAC: testSwitchAddr.MAC, DstMAC: mac(byte(10*j) + r), SrcIP: testSwitchAddr.IP,
				DstIP: ip(byte(10*j) + r), DstQP: 0x500000 + uint32(p)})
			members = append(members, McastMember{RID: rid, Port: p})
			hosts[p] = &scriptNode{sends: sends[p]}
			name := fmt.Sprintf("h%d", p)
			if err := net.AddNode(name, 1, hosts[p]); err != nil {
				t.Fatal(err)
			}
			if _, err := net.Connect(name, 0, "sw", p, emu.LinkConfig{BitsPerSecond: 100e9, Delay: time.Microsecond}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AddMcastGroup(j, members...); err != nil {
			t.Fatal(err)
		}
		if err := sc.AddJob(SwitchMLJob{Workers: 2, Spec: JobSpec{ID: j, Mask: 3, Group: j, PSPort: 7}}); err != nil {
			t.Fatal(err)
		}
	}
	return net, node, hosts
}

// smlJoins is every rank 0..ranks-1 of jobs 1..n JOINing at j µs (job j),
// asking for want aggregators, keyed by the rank's port (smlPort).
func smlJoins(n uint16, ranks uint8, want int) map[int][]timedFrame {
	sends := map[int][]timedFrame{}
	for j := uint16(1); j <= n; j++ {
		for r := uint8(0); r < ranks; r++ {
			sends[smlPort(j, r)] = []timedFrame{{time.Duration(j) * time.Microsecond,
				smlFrame(j, r, inahdr.Ctl{Op: inahdr.CtlJoin, Job: j, Rank: int(r), Want: want})}}
		}
	}
	return sends
}

// TestSwitchMLControlCrowded: more jobs present than pools fit. With 4
// aggregators and five jobs joining at once, job 1 gets all four; when it
// leaves, the four waiting jobs' share (4 ÷ 4 = 1) is below the smallest
// pool (2), so jobs 2 and 3 get two each and jobs 4 and 5 go on waiting —
// memory never sits idle while a job waits.
func TestSwitchMLControlCrowded(t *testing.T) {
	const us = time.Microsecond
	s, sc := newSML(t, 4, 12)
	port := smlPort
	sends := smlJoins(5, 2, 12)
	for r := uint8(0); r < 2; r++ {
		sends[port(1, r)] = append(sends[port(1, r)], timedFrame{20 * us, smlFrame(1, r, inahdr.Ctl{Op: inahdr.CtlLeave, Job: 1, Rank: int(r)})})
	}
	net, _, _ := smlNet(t, s, sc, 5, port, sends)
	if _, err := net.RunUntil(15 * us); err != nil {
		t.Fatal(err)
	}
	if p := sc.Pools(); len(p) != 1 || p[0].Job != 1 || p[0].Aggregators != 4 {
		t.Fatalf("before job 1 leaves: %+v", p)
	}
	if _, err := net.RunUntil(100 * us); err != nil {
		t.Fatal(err)
	}
	p := sc.Pools()
	if len(p) != 2 || p[0].Job != 2 || p[0].Aggregators != 2 || p[1].Job != 3 || p[1].Aggregators != 2 || p[0].Base == p[1].Base {
		t.Fatalf("after: pools %+v", p)
	}
	if w := sc.Waiting(); len(w) != 2 || w[0] != 4 || w[1] != 5 {
		t.Fatalf("after: waiting %v", w)
	}
}

// TestSwitchMLControlArrivals: jobs the cluster manager announced count as
// present before they JOIN. Four jobs arrive together with 16 aggregators;
// though their JOINs come one after another, each gets a quarter (4), not
// the first one the 12 it asks for.
func TestSwitchMLControlArrivals(t *testing.T) {
	const us = time.Microsecond
	s, sc := newSML(t, 16, 12)
	port := smlPort
	sends := smlJoins(4, 1, 12)
	net, _, _ := smlNet(t, s, sc, 4, port, sends)
	for j := uint16(1); j <= 4; j++ {
		if err := sc.Arrive(0, j); err != nil {
			t.Fatal(err)
		}
	}
	if err := sc.Arrive(0, 9); err == nil {
		t.Error("arrival of an unknown job accepted")
	}
	if _, err := net.RunUntil(50 * us); err != nil {
		t.Fatal(err)
	}
	p := sc.Pools()
	if len(p) != 4 {
		t.Fatalf("pools %+v", p)
	}
	for i, pl := range p {
		if pl.Job != uint16(i+1) || pl.Aggregators != 4 || pl.Base != 4*i {
			t.Errorf("pool %d: %+v, want job %d: 4 aggregators from %d", i, pl, i+1, 4*i)
		}
	}
}
