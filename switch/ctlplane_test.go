package sw

import (
	"bytes"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/dynaina"
	"github.com/inabox/inabox/switch/inahdr"
)

// The switch's own address in these tests, and the PS's GRANT rewrite.
var (
	testSwitchAddr = rdma.Endpoint{MAC: mac(200), IP: ip(200)}
	testPSRewrite  = Rewrite{SrcMAC: mac(200), DstMAC: mac(100), SrcIP: ip(200), DstIP: ip(100), DstQP: 0x400000}
)

const testPSRID = 900

// scriptNode sends frames at given times and keeps copies of what it
// receives, with the time.
type scriptNode struct {
	sends []timedFrame
	got   []timedFrame
}

type timedFrame struct {
	at    time.Duration
	frame []byte
}

func (n *scriptNode) Start(env *emu.Env) {
	for i, s := range n.sends {
		env.SetTimer(s.at, uint64(i))
	}
}

func (n *scriptNode) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	for _, p := range pkts {
		n.got = append(n.got, timedFrame{env.Now(), append([]byte(nil), p.Bytes()...)})
		env.Free(p)
	}
}

func (n *scriptNode) Timer(env *emu.Env, key uint64) {
	p := env.NewPacket()
	p.SetBytes(n.sends[key].frame)
	env.Send(0, p)
}

// ctlFrame is control message m from the PS to the switch's control QP, a
// SEND Only of opcode op (RC 0x04 or UC byte(rdma.OpUCSendOnly)).
func ctlFrame(op byte, m inahdr.Ctl) []byte {
	p := workerPkt(1, 0, 0, 0, nil)
	p.srcMAC, p.src = mac(100), ip(100)
	p.opcode, p.qp, p.meta = op, DefaultCtlQPN, m.Meta()
	return p.build()
}

// grants returns the control messages among frames, checking each is a
// UC SEND Only with a good ICRC, PSN = its chunk field, to dest QP qp.
func grantsIn(t *testing.T, who string, frames []timedFrame, qp uint32) []inahdr.Ctl {
	t.Helper()
	var out []inahdr.Ctl
	for _, f := range frames {
		b := f.frame
		h := inahdr.Header(b[offBTH+rdma.BTHLen:])
		if !h.IsCtl() {
			continue
		}
		bth := rdma.BTH(b[offBTH:])
		if !rdma.CheckICRC(b) || bth.Opcode() != rdma.OpUCSendOnly || bth.DestQP() != qp || bth.PSN() != h.Chunk()&0xFFFFFF {
			t.Fatalf("%s: control frame at %v: opcode %v qp %#x psn %d ICRC %v", who, f.at, bth.Opcode(), bth.DestQP(), bth.PSN(), rdma.CheckICRC(b))
		}
		m, err := inahdr.DecodeCtl(h)
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		out = append(out, m)
	}
	return out
}

// refGrantFrame is a GRANT for member m as the switch built it before
// inahdr.Ctl and its UC control frames: the header by hand, an RC SEND
// Only to QP 2 turned into UC by EgressUC (refEgressUC with m's rewrite).
func refGrantFrame(l Lease, rw *Rewrite) []byte {
	var hb [inahdr.Len]byte
	h := inahdr.Header(hb[:])
	h.Encode(inahdr.Meta{Flags: 0x80 | inahdr.FlagBypass, Job: l.Job, AllReduce: l.AllReduce,
		Chunk: uint32(l.Base), Worker: 2, Slot: uint16(l.Slots), Bitmap: l.Chunks})
	fh := rdma.FrameHeader{Src: testSwitchAddr, Dst: testSwitchAddr, Opcode: rdma.OpSendOnly, DestQP: 2,
		SrcPort: rdma.SourcePort(DefaultCtlQPN)}
	b := make([]byte, fh.Len(inahdr.Len))
	if _, err := fh.Encode(b, hb[:]); err != nil {
		panic(err)
	}
	refEgressUC(b, rw)
	return b
}

// ctlNet is a switch node with control plane cp on a network: workers "a"
// and "b" of job 1 on ports 1 and 2, its PS "ps" on port 40.
type ctlNet struct {
	net      *emu.Network
	node     *Node
	a, b, ps *scriptNode
}

func newCtlNet(t *testing.T, s *Switch, cp ControlPlane, ps []timedFrame) *ctlNet {
	t.Helper()
	s.SetRewrite(testPSRID, testPSRewrite)
	c := &ctlNet{net: emu.NewNetwork(emu.Config{Seed: 1}), a: &scriptNode{}, b: &scriptNode{}, ps: &scriptNode{sends: ps}}
	c.node = NewTimedNode(s, NodeConfig{PassTime: time.Nanosecond, Latency: 100 * time.Nanosecond, Control: cp, Addr: testSwitchAddr})
	if err := c.net.AddNode("sw", 64, c.node); err != nil {
		t.Fatal(err)
	}
	for name, port := range map[string]int{"a": 1, "b": 2, "ps": 40} {
		n := map[string]*scriptNode{"a": c.a, "b": c.b, "ps": c.ps}[name]
		if err := c.net.AddNode(name, 1, n); err != nil {
			t.Fatal(err)
		}
		if _, err := c.net.Connect(name, 0, "sw", port, emu.LinkConfig{BitsPerSecond: 100e9, Delay: time.Microsecond}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// TestFreeINAControlNode: FreeINA's control plane in the switch node. An
// ALLOC is answered with a GRANT to both workers and the PS, byte for byte
// the frame the switch built by hand before (RC SEND Only to QP 2 turned
// into UC by the egress rewrite); an ALLOC with a bad ICRC is counted and
// dropped, so are control frames with an unknown opcode; a FREE ends the
// lease; a lease without FREE expires; data frames still go through the
// pipeline; a crash and restart loses leases and registers, counts the
// reboot, and the control plane answers again after it.
func TestFreeINAControlNode(t *testing.T) {
	s, f := newFreeINASwitch(t, 2, 64)
	fc := NewFreeINAControl(f)
	fc.AddJob(FreeINAJob{Job: 1, PSPort: 40, PSRID: testPSRID})
	us := time.Microsecond
	bad := ctlFrame(byte(rdma.OpUCSendOnly), inahdr.Ctl{Op: inahdr.CtlAlloc, Job: 1, AllReduce: 9, Want: 4, Chunks: 10})
	bad[len(bad)-1] ^= 1
	unknown := ctlFrame(0x04, inahdr.Ctl{Op: 7, Job: 1, AllReduce: 9})
	c := newCtlNet(t, s, fc, []timedFrame{
		{0, ctlFrame(byte(rdma.OpUCSendOnly), inahdr.Ctl{Op: inahdr.CtlAlloc, Job: 1, AllReduce: 7, Want: 8, Chunks: 100})},
		{0, bad},
		{0, unknown},
		{10 * us, ctlFrame(byte(rdma.OpUCSendOnly), inahdr.Ctl{Op: inahdr.CtlFree, Job: 1, AllReduce: 7})},
		{20 * us, ctlFrame(0x04, inahdr.Ctl{Op: inahdr.CtlAlloc, Job: 1, AllReduce: 8, Want: 4, Chunks: 100})},
		{4000 * us, ctlFrame(byte(rdma.OpUCSendOnly), inahdr.Ctl{Op: inahdr.CtlAlloc, Job: 1, AllReduce: 10, Want: 16, Chunks: 100, Exact: true})},
		{6000 * us, ctlFrame(byte(rdma.OpUCSendOnly), inahdr.Ctl{Op: inahdr.CtlAlloc, Job: 1, AllReduce: 11, Want: 2, Chunks: 100})},
	})
	// Worker a contributes to all-reduce 10 (a slot claimed) before the
	// reboot.
	w := workerPkt(1, 10, 0, 0, []int32{5})
	c.a.sends = []timedFrame{{4010 * us, w.build()}}
	if err := c.net.Crash(5000*us, "sw"); err != nil {
		t.Fatal(err)
	}
	var before Stats
	c.net.At(5000*us-1, func() { before = s.Stats() })
	if err := c.net.Restart(5010*us, "sw"); err != nil {
		t.Fatal(err)
	}
	var leasesAfter []Lease
	var statsAfter Stats
	c.net.At(5011*us, func() { leasesAfter, statsAfter = f.Leases(), s.Stats() })
	if _, err := c.net.Run(); err != nil {
		t.Fatal(err)
	}
	want := []inahdr.Ctl{
		{Op: inahdr.CtlGrant, Job: 1, AllReduce: 7, Slots: 8, Base: 0, Chunks: 100},
		{Op: inahdr.CtlGrant, Job: 1, AllReduce: 8, Slots: 4, Base: 0, Chunks: 100},
		{Op: inahdr.CtlGrant, Job: 1, AllReduce: 10, Slots: 16, Base: 0, Chunks: 100},
		{Op: inahdr.CtlGrant, Job: 1, AllReduce: 11, Slots: 2, Base: 0, Chunks: 100},
	}
	for _, r := range []struct {
		who string
		n   *scriptNode
		qp  uint32
		rw  Rewrite
	}{
		{"a", c.a, qpFor(1, 0), Rewrite{SrcMAC: mac(100), DstMAC: mac(1), SrcIP: ip(100), DstIP: ip(1), DstQP: qpFor(1, 0)}},
		{"b", c.b, qpFor(1, 1), Rewrite{SrcMAC: mac(100), DstMAC: mac(2), SrcIP: ip(100), DstIP: ip(2), DstQP: qpFor(1, 1)}},
		{"ps", c.ps, testPSRewrite.DstQP, testPSRewrite},
	} {
		got := grantsIn(t, r.who, r.n.got, r.qp)
		if len(got) != len(want) {
			t.Fatalf("%s got %d GRANTs %+v, want %+v", r.who, len(got), got, want)
		}
		k := 0
		for i, g := range got {
			if g != want[i] {
				t.Fatalf("%s: GRANT %d = %v, want %v", r.who, i, g, want[i])
			}
			for ; !inahdr.Header(r.n.got[k].frame[offBTH+rdma.BTHLen:]).IsCtl(); k++ {
			}
			l := Lease{Job: g.Job, AllReduce: g.AllReduce, Base: g.Base, Slots: g.Slots, Chunks: g.Chunks}
			if ref := refGrantFrame(l, &r.rw); !bytes.Equal(r.n.got[k].frame, ref) {
				t.Fatalf("%s: GRANT %d\n% x\nbuilt by hand before:\n% x", r.who, i, r.n.got[k].frame, ref)
			}
			k++
		}
	}
	// The PS got worker a's trimmed contribution (the pipeline ran).
	trimmed := 0
	for _, g := range c.ps.got {
		if h := inahdr.Header(g.frame[offBTH+rdma.BTHLen:]); h.IsAbsorbed() && h.AllReduce() == 10 {
			trimmed++
		}
	}
	if trimmed != 1 || before.SlotsClaimed != 1 {
		t.Fatalf("contribution before the reboot: %d trimmed to the PS, %d slots claimed", trimmed, before.SlotsClaimed)
	}
	if len(leasesAfter) != 0 || statsAfter.SlotsClaimed != 0 || statsAfter.SlotsFree != s.Config().Slots {
		t.Fatalf("after the reboot: leases %+v, slots %+v", leasesAfter, statsAfter)
	}
	if ns := c.node.Stats(); ns.CtlBadICRC != 1 || ns.CtlMalformed != 1 || ns.CtlForeign != 0 || ns.Reboots != 1 || ns.Overruns != 0 {
		t.Fatalf("node stats %+v", ns)
	}
	// ar 7 freed, ar 8 and ar 11 expired (ar 10 lost in the reboot).
	if fs := f.Stats(); fs.Grants != 4 || fs.Frees != 1 || fs.Expired != 2 {
		t.Fatalf("lease stats %+v", fs)
	}
	if ls := f.Leases(); len(ls) != 0 {
		t.Fatalf("leases left %+v", ls)
	}
}

// TestDynaINAControlNode: DynaINA's control plane in the switch node, jobs
// registered by the cluster manager at their arrival (emu.Network.At). An
// ALLOC of a job not registered yet is answered with a GRANT of 0 (the PS
// path); after its registration the job's ALLOC gets a lease in its pool.
func TestDynaINAControlNode(t *testing.T) {
	s, f := newFreeINASwitch(t, 2, 100)
	rtt := time.Duration(50 * 2688 * 1e9 / 100e9)
	d, err := NewDynaINAControl(f, dynaina.Config{RTT: rtt, MinSlots: 20})
	if err != nil {
		t.Fatal(err)
	}
	d.AddJob(FreeINAJob{Job: 1, PSPort: 40, PSRID: testPSRID})
	us := time.Microsecond
	c := newCtlNet(t, s, d, []timedFrame{
		{0, ctlFrame(byte(rdma.OpUCSendOnly), inahdr.Ctl{Op: inahdr.CtlAlloc, Job: 1, AllReduce: 1, Want: 50, Chunks: 1000})},
		{20 * us, ctlFrame(byte(rdma.OpUCSendOnly), inahdr.Ctl{Op: inahdr.CtlAlloc, Job: 1, AllReduce: 2, Want: 50, Chunks: 1000})},
		{30 * us, ctlFrame(byte(rdma.OpUCSendOnly), inahdr.Ctl{Op: inahdr.CtlFree, Job: 1, AllReduce: 2})},
	})
	prof := dynaina.JobProfile{ID: 1, Workers: 2, GradientBytes: gradFor(time.Millisecond), Compute: time.Millisecond}
	c.net.At(10*us, func() {
		if err := d.Register(c.net.Now(), prof, 1); err != nil {
			t.Error(err)
		}
	})
	if _, err := c.net.Run(); err != nil {
		t.Fatal(err)
	}
	got := grantsIn(t, "ps", c.ps.got, testPSRewrite.DstQP)
	if len(got) != 2 || got[0].AllReduce != 1 || got[0].Slots != 0 || got[1].AllReduce != 2 || got[1].Slots != 50 {
		t.Fatalf("GRANTs %+v", got)
	}
	if st := d.Stats(); st.Registered != 1 || st.Unregistered != 1 || st.Grants != 1 || st.Outside != 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := d.Err(); err != nil {
		t.Fatal(err)
	}
	if ls := f.Leases(); len(ls) != 0 || d.Scheduler().FreeSlots() != 100 {
		t.Fatalf("leases %+v, free %d", ls, d.Scheduler().FreeSlots())
	}
}

// timerPlane is a control plane that records its callbacks.
type timerPlane struct {
	log []string
}

func (p *timerPlane) Start(c *CtlEnv) {
	p.log = append(p.log, "start")
	c.SetTimer(50, outputTimer) // the node's own output key: no collision
	c.SetTimer(150, 7)
}
func (p *timerPlane) Frames(c *CtlEnv) { p.log = append(p.log, "frames@"+c.Now().String()) }
func (p *timerPlane) Control(c *CtlEnv, port int, m inahdr.Ctl) {
	p.log = append(p.log, "control "+m.String())
}
func (p *timerPlane) Timer(c *CtlEnv, key uint64) {
	p.log = append(p.log, "timer "+string(rune('0'+key))+"@"+c.Now().String())
}
func (p *timerPlane) Settle(c *CtlEnv) { p.log = append(p.log, "settle") }
func (p *timerPlane) Reset()           { p.log = append(p.log, "reset") }

// TestControlPlaneTimers: the control plane's timer keys live in their
// own space (its key 1 is not the node's output timer), every callback
// ends with Settle, and the node releases its outputs on its own timer.
func TestControlPlaneTimers(t *testing.T) {
	s := newTestSwitch(t, 64)
	if err := s.AddL2(mac(9), 9); err != nil {
		t.Fatal(err)
	}
	cp := &timerPlane{}
	n := NewTimedNode(s, NodeConfig{Latency: 100, Control: cp})
	net := emu.NewNetwork(emu.Config{Seed: 1})
	p := workerPkt(1, 1, 0, 0, nil)
	p.dstMAC, p.meta.Flags = mac(9), inahdr.FlagBypass // plain L2 traffic
	src := &scriptNode{sends: []timedFrame{{0, p.build()}}}
	sink := &scriptNode{}
	net.AddNode("sw", 64, n)
	net.AddNode("src", 1, src)
	net.AddNode("sink", 1, sink)
	net.Connect("src", 0, "sw", 1, emu.LinkConfig{})
	net.Connect("sink", 0, "sw", 9, emu.LinkConfig{})
	if _, err := net.Run(); err != nil {
		t.Fatal(err)
	}
	want := []string{"start", "settle", "frames@0s", "settle", "timer 1@50ns", "settle", "settle", "timer 7@150ns", "settle"}
	if len(cp.log) != len(want) {
		t.Fatalf("callbacks %q, want %q", cp.log, want)
	}
	for i := range want {
		if cp.log[i] != want[i] {
			t.Fatalf("callbacks %q, want %q", cp.log, want)
		}
	}
	if len(sink.got) != 1 || sink.got[0].at != 100 {
		t.Fatalf("output %+v", sink.got)
	}
}

// TestNodeRebootWithoutControl: a switch without a control plane (the
// baselines') reboots too: registers lost, the reboot counted, tables
// kept.
func TestNodeRebootWithoutControl(t *testing.T) {
	s := newTestSwitch(t, 1024)
	if err := s.SetPool(1, 0, 1024, 1); err != nil {
		t.Fatal(err)
	}
	installJob(t, s, 1, 2, StageHashed, 1, 0, 40)
	n := NewTimedNode(s, NodeConfig{PassTime: time.Nanosecond})
	net := emu.NewNetwork(emu.Config{Seed: 1})
	w0 := &scriptNode{sends: []timedFrame{{0, workerPkt(1, 1, 5, 0, []int32{1}).build()}}}
	w1 := &scriptNode{sends: []timedFrame{{time.Millisecond, workerPkt(1, 1, 5, 1, []int32{2}).build()}}}
	net.AddNode("sw", 64, n)
	net.AddNode("w0", 1, w0)
	net.AddNode("w1", 1, w1)
	net.Connect("w0", 0, "sw", 1, emu.LinkConfig{})
	net.Connect("w1", 0, "sw", 2, emu.LinkConfig{})
	var claimed int
	net.At(time.Microsecond, func() { claimed = s.Stats().SlotsClaimed })
	net.Crash(2*time.Microsecond, "sw")
	net.Restart(3*time.Microsecond, "sw")
	if _, err := net.Run(); err != nil {
		t.Fatal(err)
	}
	// The second contribution found its chunk's partial sum gone: it
	// claimed the aggregator afresh, so the chunk is not complete.
	if st := s.Stats(); claimed != 1 || st.SlotsClaimed != 1 || n.Stats().Reboots != 1 || len(w0.got)+len(w1.got) != 0 {
		t.Fatalf("claimed %d before, %+v after, node %+v, %d outputs", claimed, st, n.Stats(), len(w0.got)+len(w1.got))
	}
	if js, _ := s.JobStats(1); js.Results != 0 {
		t.Fatalf("job stats %+v", js)
	}
}

// looper sends its contribution every period with the next chunk.
type looper struct {
	frame  []byte
	period time.Duration
	chunk  uint32
	sent   int
}

func (l *looper) Start(env *emu.Env) { env.SetTimer(l.period, 0) }
func (l *looper) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	for _, p := range pkts {
		env.Free(p)
	}
}
func (l *looper) Timer(env *emu.Env, key uint64) {
	p := env.NewPacket()
	p.SetBytes(l.frame)
	inahdr.Header(p.Bytes()[offBTH+rdma.BTHLen:]).SetChunk(l.chunk)
	l.chunk++
	l.sent++
	env.Send(0, p)
	env.SetTimer(env.Now()+l.period, 0)
}

// TestNodeZeroAllocsPerPacket: the switch node with FreeINA's and with
// DynaINA's control plane allocates nothing per packet in steady state
// (UC contributions of two workers, absorbed and multicast).
func TestNodeZeroAllocsPerPacket(t *testing.T) {
	for _, plane := range []string{"freeina", "dynaina"} {
		t.Run(plane, func(t *testing.T) {
			s, f := newFreeINASwitch(t, 2, 100)
			var cp ControlPlane
			if plane == "freeina" {
				fc := NewFreeINAControl(f)
				fc.AddJob(FreeINAJob{Job: 1, PSPort: 40, PSRID: testPSRID})
				if l := f.Alloc(0, 1, 1, 1<<30, 64); l.Slots != 64 {
					t.Fatalf("lease %+v", l)
				}
				cp = fc
			} else {
				d, err := NewDynaINAControl(f, dynaina.Config{RTT: time.Duration(50 * 2688 * 1e9 / 100e9), MinSlots: 20})
				if err != nil {
					t.Fatal(err)
				}
				d.AddJob(FreeINAJob{Job: 1, PSPort: 40, PSRID: testPSRID})
				if err := d.Register(0, dynaina.JobProfile{ID: 1, Workers: 2, GradientBytes: gradFor(time.Second), Compute: time.Millisecond}, 0); err != nil {
					t.Fatal(err)
				}
				if g := d.Alloc(0, 1, 1, 1<<30, 50, false); len(g) != 1 || g[0].Slots != 50 {
					t.Fatalf("grant %+v", g)
				}
				cp = d
			}
			n := NewTimedNode(s, NodeConfig{PassTime: time.Nanosecond, Latency: 500 * time.Nanosecond, Control: cp, Addr: testSwitchAddr})
			net := emu.NewNetwork(emu.Config{Seed: 1})
			net.AddNode("sw", 64, n)
			var ws []*looper
			for w := 0; w < 2; w++ {
				p := workerPkt(1, 1, 0, uint8(w), make([]int32, 64))
				p.opcode = byte(rdma.OpUCSendOnly)
				l := &looper{frame: p.build(), period: 100 * time.Nanosecond}
				ws = append(ws, l)
				name := string(rune('a' + w))
				net.AddNode(name, 1, l)
				net.Connect(name, 0, "sw", w+1, emu.LinkConfig{BitsPerSecond: 100e9, Delay: time.Microsecond})
			}
			step := time.Millisecond
			if _, err := net.RunUntil(step); err != nil { // warm up pools and slices
				t.Fatal(err)
			}
			before := ws[0].sent + ws[1].sent
			allocs := testing.AllocsPerRun(20, func() {
				step += 100 * time.Microsecond
				if _, err := net.RunUntil(step); err != nil {
					t.Fatal(err)
				}
			})
			perRun := float64(ws[0].sent+ws[1].sent-before) / 21
			if js, _ := s.JobStats(1); perRun < 1000 || js.Results == 0 {
				t.Fatalf("only %.0f packets per run, %d results: nothing aggregates", perRun, js.Results)
			}
			t.Logf("%.1f allocs per run of %.0f packets", allocs, perRun)
			if allocs/perRun > 0.001 {
				t.Errorf("%.1f allocs per run of %.0f packets (%.4f per packet)", allocs, perRun, allocs/perRun)
			}
		})
	}
}
