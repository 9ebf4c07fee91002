package rdma

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/inabox/inabox/emu"
)

// TestEmuLossyExactlyOnce runs two QPs over the emulator with 5% loss, 5%
// duplication and 5% reordering per direction, starting just below the PSN
// wrap, and checks that every message arrives exactly once and in order, in
// virtual time.
func TestEmuLossyExactlyOnce(t *testing.T) {
	n := 1_000_000
	switch {
	case raceEnabled:
		n = 20_000
	case testing.Short():
		n = 100_000
	}
	res := runEmuPair(t, emuPairConfig{
		messages: n, size: 16, mtu: 1024,
		link: emu.LinkConfig{
			BitsPerSecond: 100e9, Delay: 2 * time.Microsecond, QueuePackets: 4096,
			Impairments: emu.Impairments{Loss: 0.05, Duplicate: 0.05, Reorder: 0.05},
		},
		startPSN: PSNMask - uint32(n/3),
		window:   32,
	})
	t.Logf("%d messages in %v virtual time; requester %+v; responder dup=%d ooo=%d naks=%d",
		n, res.end, res.reqStats, res.respStats.RxDuplicates, res.respStats.RxOutOfSequence, res.respStats.TxNAKs)
	if res.reqStats.TxRetransmits == 0 || res.respStats.RxDuplicates == 0 || res.respStats.RxOutOfSequence == 0 {
		t.Fatal("impairments had no visible effect")
	}
	if res.finalPSN >= PSNMask-uint32(n/3) {
		t.Fatalf("PSN did not wrap (final %#x)", res.finalPSN)
	}
}

type emuPairConfig struct {
	messages, size, mtu int
	window              int // MaxUnacked; 0 = default
	capture             io.Writer
	link                emu.LinkConfig
	startPSN            uint32
}

type emuPairResult struct {
	end                 time.Duration
	reqStats, respStats Stats
	finalPSN            uint32
	bytes               int64
}

// runEmuPair sends cfg.messages SEND-with-immediate messages from host a to
// host b over one emulated link and verifies exactly-once in-order delivery.
func runEmuPair(t testing.TB, cfg emuPairConfig) emuPairResult {
	t.Helper()
	ca, cb := qpConfigs(cfg.mtu, cfg.startPSN, PSNMask-3)
	ca.Timeout, cb.Timeout = 4, 4 // 65.5 µs
	ca.Memory, cb.Memory = nil, nil
	if cfg.window > 0 {
		ca.MaxUnacked = cfg.window
	}
	qa, err := NewQP(ca)
	if err != nil {
		t.Fatal(err)
	}
	qb, err := NewQP(cb)
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, cfg.size)
	posted, completed, received := 0, 0, 0
	var fail error
	const depth = 256
	post := func() {
		for posted < cfg.messages && posted-completed < depth {
			if err := qa.PostSend(WorkRequest{ID: uint64(posted), Op: WRSendImm, Imm: uint32(posted), Data: payload}); err != nil {
				fail = err
				return
			}
			posted++
		}
	}
	ha := NewHost(qa)
	ha.OnStart = func(*emu.Env, *Host) { post() }
	ha.OnCompletion = func(_ *emu.Env, _ *QP, c *Completion) {
		if c.Opcode != CompSend || c.WRID != uint64(completed) || c.Status != StatusSuccess {
			if fail == nil {
				fail = fmt.Errorf("requester completion %d: %+v (QP err %v)", completed, *c, qa.Err())
			}
			return
		}
		completed++
		post()
	}
	hb := NewHost(qb)
	hb.OnCompletion = func(_ *emu.Env, _ *QP, c *Completion) {
		if c.Opcode != CompRecv || c.Imm != uint32(received) || len(c.Data) != cfg.size {
			if fail == nil {
				fail = fmt.Errorf("message %d delivered as %+v", received, *c)
			}
			return
		}
		received++
	}
	net := emu.NewNetwork(emu.Config{Seed: 42})
	if err := net.AddNode("a", 1, ha); err != nil {
		t.Fatal(err)
	}
	if err := net.AddNode("b", 1, hb); err != nil {
		t.Fatal(err)
	}
	if cfg.link.MTUBytes == 0 {
		cfg.link.MTUBytes = 9000
	}
	if _, err := net.Connect("a", 0, "b", 0, cfg.link); err != nil {
		t.Fatal(err)
	}
	if cfg.capture != nil {
		if err := net.Capture("a", 0, cfg.capture); err != nil {
			t.Fatal(err)
		}
	}
	end, err := net.RunUntil(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if fail != nil {
		t.Fatal(fail)
	}
	if received != cfg.messages || completed != cfg.messages {
		t.Fatalf("received %d, completed %d of %d messages (a: %v %v; b: %v)", received, completed, cfg.messages, qa.State(), qa.Err(), qb.State())
	}
	if ha.Dropped+hb.Dropped != 0 && cfg.link.Impairments.Corrupt == 0 {
		t.Fatalf("hosts dropped %d/%d frames", ha.Dropped, hb.Dropped)
	}
	return emuPairResult{end: end, reqStats: qa.Stats(), respStats: qb.Stats(), finalPSN: qa.SendPSN(), bytes: int64(cfg.messages) * int64(cfg.size)}
}

// TestHostZeroAllocsPerPacket: two Hosts moving RC traffic in steady state
// (transmission, ACKs, completions and timer re-arming through FlushQP)
// allocate nothing per packet.
func TestHostZeroAllocsPerPacket(t *testing.T) {
	ca, cb := qpConfigs(1024, 100, 200)
	ca.Timeout, cb.Timeout = 4, 4
	ca.Memory, cb.Memory = nil, nil
	qa, err := NewQP(ca)
	if err != nil {
		t.Fatal(err)
	}
	qb, err := NewQP(cb)
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 512)
	received := 0
	post := func() {
		for qa.Outstanding() < 64 {
			if err := qa.PostSend(WorkRequest{Data: payload}); err != nil {
				t.Error(err)
				return
			}
		}
	}
	ha, hb := NewHost(qa), NewHost(qb)
	ha.OnStart = func(*emu.Env, *Host) { post() }
	ha.OnCompletion = func(*emu.Env, *QP, *Completion) { post() }
	hb.OnCompletion = func(*emu.Env, *QP, *Completion) { received++ }
	net := emu.NewNetwork(emu.Config{Seed: 1})
	if err := net.AddNode("a", 1, ha); err != nil {
		t.Fatal(err)
	}
	if err := net.AddNode("b", 1, hb); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Connect("a", 0, "b", 0, emu.LinkConfig{BitsPerSecond: 100e9, Delay: time.Microsecond, QueuePackets: 4096}); err != nil {
		t.Fatal(err)
	}
	step := time.Millisecond
	if _, err := net.RunUntil(step); err != nil { // warm up pools and slices
		t.Fatal(err)
	}
	before := received
	allocs := testing.AllocsPerRun(20, func() {
		step += 200 * time.Microsecond
		if _, err := net.RunUntil(step); err != nil {
			t.Fatal(err)
		}
	})
	perRun := float64(received-before) / 21
	if perRun < 1000 {
		t.Fatalf("only %.0f messages per run: the pair is not moving", perRun)
	}
	// A pool or queue may still grow by a block; allow a handful per 1000s of packets.
	if allocs/perRun > 0.001 {
		t.Errorf("%.1f allocs per run of %.0f messages (%.4f per message)", allocs, perRun, allocs/perRun)
	}
}

// flushProbe is an emu.Node that drives one QP by hand through phases
// (timers 1, 2, …, a microsecond apart), to see what each FlushQP sends.
type flushProbe struct {
	timer QPTimer
	phase func(env *emu.Env, p *flushProbe, k int)
}

func (p *flushProbe) Start(env *emu.Env) { p.Timer(env, 0) }
func (p *flushProbe) Receive(env *emu.Env, _ int, pkts []*emu.Packet) {
	for _, k := range pkts {
		env.Free(k)
	}
}
func (p *flushProbe) Timer(env *emu.Env, key uint64) {
	if p.phase == nil || key >= 100 {
		return
	}
	p.phase(env, p, int(key))
	env.SetTimer(env.Now()+time.Microsecond, key+1)
}

// TestFlushQPAfterInputOnly: a FlushQP with no input to its QP since the
// last sends nothing; one after an input (PostSend, a fired timeout) sends
// what the input made sendable.
func TestFlushQPAfterInputOnly(t *testing.T) {
	ca, cb := qpConfigs(1024, 0, 0)
	ca.MaxUnacked = 1 // the second message waits for the first's ACK
	qa, err := NewQP(ca)
	if err != nil {
		t.Fatal(err)
	}
	qb, err := NewQP(cb) // the peer, by hand: its request makes qa answer
	if err != nil {
		t.Fatal(err)
	}
	net := emu.NewNetwork(emu.Config{Seed: 1})
	var sent []uint64 // frames sent before each phase from 1 on
	post := func(id uint64) {
		if err := qa.PostSend(WorkRequest{ID: id, Op: WRSend, Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	probe := &flushProbe{phase: func(env *emu.Env, p *flushProbe, k int) {
		if k > 0 && k <= 6 {
			s, _ := net.PortStats("a", 0)
			sent = append(sent, s.TxPackets)
		}
		switch k {
		case 0: // no input yet
		case 1:
			post(1) // sent
		case 2: // no input
		case 3:
			post(2) // waits for the first's ACK, which never comes
		case 4:
			at, ok := qa.NextTimeout()
			if !ok {
				t.Fatal("no timeout armed")
			}
			qa.HandleTimeout(at) // the first is sent again (the timer left as it is)
		case 5: // a request from the peer: qa owes it an ACK
			if err := qb.PostSend(WorkRequest{ID: 9, Op: WRSend, Data: []byte("y")}); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, qb.MaxFrameLen())
			n := qb.PollTransmit(env.Now(), buf)
			if err := qa.Receive(env.Now(), buf[:n]); err != nil {
				t.Fatal(err)
			}
		default:
			return
		}
		FlushQP(env, 0, qa, 0, &p.timer)
	}}
	if err := net.AddNode("a", 1, probe); err != nil {
		t.Fatal(err)
	}
	if err := net.AddNode("b", 1, &flushProbe{}); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Connect("a", 0, "b", 0, emu.LinkConfig{BitsPerSecond: 1e9, MTUBytes: 9000}); err != nil {
		t.Fatal(err)
	}
	if _, err := net.RunUntil(10 * time.Microsecond); err != nil {
		t.Fatal(err)
	}
	if want := []uint64{0, 1, 1, 1, 2, 3}; fmt.Sprint(sent) != fmt.Sprint(want) {
		t.Fatalf("frames sent before phases 1-6: %v, want %v", sent, want)
	}
	if at, _ := qa.NextTimeout(); at != probe.timer.at || !probe.timer.on {
		t.Fatalf("the timer is at %v (on %v), the QP's next timeout at %v", probe.timer.at, probe.timer.on, at)
	}
}
