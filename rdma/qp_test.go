package rdma

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// pair is two connected QPs and a tiny deterministic channel between them:
// frames wait in per-direction queues until the test delivers them.
type pair struct {
	t      testing.TB
	a, b   *QP
	now    time.Duration
	wire   [2][][]byte // frames in flight: [0] a→b, [1] b→a
	buf    []byte
	got    [2][]Completion // completions seen at a and b (Data copied)
	rng    *rand.Rand
	loss   float64
	dup    float64
	reord  float64
	frames [2]int // frames transmitted per direction
	// deferred: frames are taken with PollTransmitDeferred and sealed
	// (SealICRC) before they go on the wire
	deferred bool
	sent     [][]byte // with log: every frame transmitted, in order
	log      bool
}

func qpConfigs(mtu int, psnA, psnB uint32) (Config, Config) {
	a := Config{Local: epA, Remote: epB, QPN: 0x11, RemoteQPN: 0x22, MTU: mtu,
		SendPSN: psnA, RecvPSN: psnB, Timeout: 10, RetryCount: 7, RNRRetry: 7,
		Memory: make([]byte, 1<<16), RKey: 0xA}
	b := Config{Local: epB, Remote: epA, QPN: 0x22, RemoteQPN: 0x11, MTU: mtu,
		SendPSN: psnB, RecvPSN: psnA, Timeout: 10, RetryCount: 7, RNRRetry: 7,
		Memory: make([]byte, 1<<16), RKey: 0xB}
	return a, b
}

func newPair(t testing.TB, ca, cb Config) *pair {
	t.Helper()
	a, err := NewQP(ca)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewQP(cb)
	if err != nil {
		t.Fatal(err)
	}
	return &pair{t: t, a: a, b: b, buf: make([]byte, 4096+MaxOverhead), rng: rand.New(rand.NewPCG(7, 9))}
}

// pump moves every pending transmission of both QPs onto the wire.
func (p *pair) pump() {
	for i, q := range []*QP{p.a, p.b} {
		for {
			var n int
			if p.deferred {
				clear(p.buf)
				n = q.PollTransmitDeferred(p.now, p.buf)
				SealICRC(p.buf[:n])
			} else {
				n = q.PollTransmit(p.now, p.buf)
			}
			if n == 0 {
				break
			}
			p.frames[i]++
			f := append([]byte(nil), p.buf[:n]...)
			if p.log {
				p.sent = append(p.sent, f)
			}
			if !CheckICRC(f) || refICRC(p.t, f) != binary.LittleEndian.Uint32(f[n-4:]) {
				p.t.Fatalf("QP emitted a frame with a bad ICRC")
			}
			p.wire[i] = append(p.wire[i], f)
		}
	}
}

// deliver hands every frame in flight to its destination, applying the
// channel's impairments, then collects completions.
func (p *pair) deliver() {
	for i, dst := range []*QP{p.b, p.a} {
		frames := p.wire[i]
		p.wire[i] = nil
		var late [][]byte
		for _, f := range frames {
			if p.rng.Float64() < p.loss {
				continue
			}
			if p.rng.Float64() < p.reord {
				late = append(late, f)
				continue
			}
			p.rx(dst, f)
			if p.rng.Float64() < p.dup {
				p.rx(dst, f)
			}
		}
		for j := len(late) - 1; j >= 0; j-- {
			p.rx(dst, late[j])
		}
	}
}

func (p *pair) rx(dst *QP, f []byte) {
	_ = dst.Receive(p.now, f)
	p.collect()
}

func (p *pair) collect() {
	for i, q := range []*QP{p.a, p.b} {
		for {
			c, ok := q.PollCompletion()
			if !ok {
				break
			}
			c.Data = append([]byte(nil), c.Data...)
			p.got[i] = append(p.got[i], c)
		}
	}
}

// run alternates pump/deliver, advancing virtual time to the next timer
// when the wire is idle, until done reports true or steps run out.
func (p *pair) run(steps int, done func() bool) {
	p.t.Helper()
	for i := 0; i < steps && !done(); i++ {
		p.pump()
		if len(p.wire[0])+len(p.wire[1]) == 0 {
			next, ok1 := p.a.NextTimeout()
			nb, ok2 := p.b.NextTimeout()
			if ok2 && (!ok1 || nb < next) {
				next, ok1 = nb, true
			}
			if !ok1 {
				break
			}
			p.now = max(p.now, next)
			p.a.HandleTimeout(p.now)
			p.b.HandleTimeout(p.now)
			p.collect()
			continue
		}
		p.now += time.Microsecond
		p.deliver()
	}
}

func msg(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i*31 + j)
	}
	if n >= 4 {
		binary.BigEndian.PutUint32(b, uint32(i))
	}
	return b
}

func TestQPSendWriteAllShapes(t *testing.T) {
	ca, cb := qpConfigs(256, PSNMask-5, 100)
	p := newPair(t, ca, cb)
	sizes := []int{0, 1, 3, 255, 256, 257, 512, 1000, 2048}
	var want []WorkRequest
	id := uint64(0)
	for _, n := range sizes {
		for _, op := range []WROpcode{WRSend, WRSendImm, WRWrite, WRWriteImm} {
			id++
			wr := WorkRequest{ID: id, Op: op, Data: msg(int(id), n), Imm: uint32(id) * 3, RemoteAddr: 4096, RKey: 0xB, Solicited: id%2 == 0}
			if err := p.a.PostSend(wr); err != nil {
				t.Fatal(err)
			}
			want = append(want, wr)
		}
	}
	p.run(100000, func() bool { return p.a.Outstanding() == 0 })
	if p.a.Outstanding() != 0 {
		t.Fatalf("%d work requests never completed", p.a.Outstanding())
	}
	// Requester completions in posting order.
	if len(p.got[0]) != len(want) {
		t.Fatalf("%d requester completions, want %d", len(p.got[0]), len(want))
	}
	for i, c := range p.got[0] {
		if c.WRID != want[i].ID || c.Status != StatusSuccess {
			t.Fatalf("completion %d = %+v, want WRID %d success", i, c, want[i].ID)
		}
	}
	// Responder: one completion per SEND and per WRITE-with-immediate.
	recv := append([]Completion(nil), p.got[1]...)
	j := 0
	for _, wr := range want {
		switch wr.Op {
		case WRSend, WRSendImm:
			c := recv[j]
			j++
			if c.Opcode != CompRecv || !bytes.Equal(c.Data, wr.Data) || c.HasImm != (wr.Op == WRSendImm) || (c.HasImm && c.Imm != wr.Imm) || c.Solicited != wr.Solicited {
				t.Fatalf("wr %d: recv completion %+v", wr.ID, c)
			}
		case WRWriteImm:
			c := recv[j]
			j++
			if c.Opcode != CompRecvWriteImm || c.Imm != wr.Imm || c.ByteLen != len(wr.Data) {
				t.Fatalf("wr %d: write-imm completion %+v", wr.ID, c)
			}
		}
	}
	if j != len(recv) {
		t.Fatalf("%d unexpected responder completions", len(recv)-j)
	}
	// The last write landed in B's memory.
	last := want[len(want)-1]
	if !bytes.Equal(p.b.cfg.Memory[4096:4096+len(last.Data)], last.Data) {
		t.Fatal("RDMA WRITE data not in the responder's memory")
	}
	if s := p.b.Stats(); s.RxDuplicates != 0 || s.RxOutOfSequence != 0 {
		t.Fatalf("clean channel saw duplicates/out-of-sequence: %+v", s)
	}
	if p.a.SendPSN() != PSNAdd(PSNMask-5, int(p.a.Stats().TxPackets-0)) && false {
		t.Fatal("unreachable")
	}
}

// captured frames from a QP, without delivery.
func (p *pair) take(from *QP) [][]byte {
	var out [][]byte
	for {
		n := from.PollTransmit(p.now, p.buf)
		if n == 0 {
			return out
		}
		out = append(out, append([]byte(nil), p.buf[:n]...))
	}
}

func parse(t testing.TB, f []byte) *Frame {
	t.Helper()
	fr := new(Frame)
	if err := fr.Parse(f); err != nil {
		t.Fatal(err)
	}
	return fr
}

func TestQPNAKOnGapAndGoBackN(t *testing.T) {
	ca, cb := qpConfigs(1024, PSNMask-1, 5) // PSNs wrap: FFFFFE, FFFFFF, 0, 1
	p := newPair(t, ca, cb)
	for i := 0; i < 4; i++ {
		if err := p.a.PostSend(WorkRequest{ID: uint64(i), Op: WRSend, Data: msg(i, 16)}); err != nil {
			t.Fatal(err)
		}
	}
	fs := p.take(p.a)
	if len(fs) != 4 {
		t.Fatalf("%d frames, want 4", len(fs))
	}
	// Lose the second packet (PSN FFFFFF).
	_ = p.b.Receive(p.now, fs[0])
	_ = p.b.Receive(p.now, fs[2])
	_ = p.b.Receive(p.now, fs[3])
	resp := p.take(p.b)
	if len(resp) != 1 {
		t.Fatalf("responder sent %d frames, want one NAK (the ACK of PSN FFFFFE coalesced)", len(resp))
	}
	nak := parse(t, resp[0])
	if nak.BTH.Opcode() != OpAck || nak.AETH.Syndrome() != SyndromeNAKPSNSeq || nak.BTH.PSN() != PSNMask {
		t.Fatalf("got %v %v PSN %#x, want NAK PSN-seq for PSN 0xFFFFFF", nak.BTH.Opcode(), nak.AETH.Syndrome(), nak.BTH.PSN())
	}
	if nak.AETH.MSN() != 1 {
		t.Fatalf("NAK MSN %d, want 1", nak.AETH.MSN())
	}
	if s := p.b.Stats(); s.RxOutOfSequence != 2 || s.TxNAKs != 1 {
		t.Fatalf("responder stats %+v: want 2 out-of-sequence, 1 NAK", s)
	}
	// Only one message was delivered: no out-of-order delivery.
	p.collect()
	if len(p.got[1]) != 1 || binary.BigEndian.Uint32(p.got[1][0].Data) != 0 {
		t.Fatalf("responder delivered %d messages, want only message 0", len(p.got[1]))
	}
	// The NAK completes WR 0 and makes the requester go back to FFFFFF.
	if err := p.a.Receive(p.now, resp[0]); err != nil {
		t.Fatal(err)
	}
	p.collect()
	if len(p.got[0]) != 1 || p.got[0][0].WRID != 0 {
		t.Fatalf("requester completions %+v, want WR 0 only", p.got[0])
	}
	re := p.take(p.a)
	if len(re) != 3 {
		t.Fatalf("go-back-N resent %d frames, want 3", len(re))
	}
	for i, want := range []uint32{PSNMask, 0, 1} {
		if got := parse(t, re[i]).BTH.PSN(); got != want {
			t.Fatalf("retransmission %d has PSN %#x, want %#x", i, got, want)
		}
	}
	if s := p.a.Stats(); s.TxRetransmits != 3 || s.GoBackN != 1 {
		t.Fatalf("requester stats %+v", s)
	}
	for _, f := range re {
		_ = p.b.Receive(p.now, f)
	}
	p.collect()
	if len(p.got[1]) != 4 {
		t.Fatalf("%d messages delivered, want 4", len(p.got[1]))
	}
	for i, c := range p.got[1] {
		if binary.BigEndian.Uint32(c.Data) != uint32(i) {
			t.Fatalf("message %d delivered out of order", i)
		}
	}
	// One coalesced ACK for PSN 1 completes the rest.
	acks := p.take(p.b)
	if len(acks) != 1 || parse(t, acks[0]).BTH.PSN() != 1 || !parse(t, acks[0]).AETH.Syndrome().IsACK() {
		t.Fatalf("want a single ACK for PSN 1, got %d frames", len(acks))
	}
	_ = p.a.Receive(p.now, acks[0])
	p.collect()
	if len(p.got[0]) != 4 || p.a.Outstanding() != 0 {
		t.Fatalf("requester completed %d, outstanding %d", len(p.got[0]), p.a.Outstanding())
	}
	if _, ok := p.a.NextTimeout(); ok {
		t.Fatal("timer still armed with nothing outstanding")
	}
}

func TestQPCoalescedACK(t *testing.T) {
	ca, cb := qpConfigs(256, 1000, 2000)
	p := newPair(t, ca, cb)
	for i := 0; i < 10; i++ {
		_ = p.a.PostSend(WorkRequest{ID: uint64(i), Data: msg(i, 100)})
	}
	for _, f := range p.take(p.a) {
		if !parse(t, f).BTH.AckReq() {
			t.Fatal("SEND Only without AckReq")
		}
		_ = p.b.Receive(p.now, f)
	}
	acks := p.take(p.b)
	if len(acks) != 1 {
		t.Fatalf("responder sent %d ACKs for 10 messages received before polling, want 1", len(acks))
	}
	ack := parse(t, acks[0])
	if ack.BTH.PSN() != 1009 || ack.AETH.MSN() != 10 || ack.AETH.Syndrome() != SyndromeACK {
		t.Fatalf("ACK PSN %d MSN %d syndrome %v", ack.BTH.PSN(), ack.AETH.MSN(), ack.AETH.Syndrome())
	}
	_ = p.a.Receive(p.now, acks[0])
	p.collect()
	if len(p.got[0]) != 10 {
		t.Fatalf("one ACK completed %d WRs, want 10", len(p.got[0]))
	}
	for i, c := range p.got[0] {
		if c.WRID != uint64(i) {
			t.Fatal("completions out of posting order")
		}
	}
}

func TestQPDuplicateReACKedNotRedelivered(t *testing.T) {
	ca, cb := qpConfigs(256, 50, 60)
	p := newPair(t, ca, cb)
	_ = p.a.PostSend(WorkRequest{ID: 1, Data: msg(1, 600)}) // 3 packets
	fs := p.take(p.a)
	for _, f := range fs {
		_ = p.b.Receive(p.now, f)
	}
	first := p.take(p.b)
	for _, f := range fs { // all three again
		_ = p.b.Receive(p.now, f)
	}
	p.collect()
	if len(p.got[1]) != 1 {
		t.Fatalf("message delivered %d times, want once", len(p.got[1]))
	}
	re := p.take(p.b)
	if len(first) != 1 || len(re) != 1 {
		t.Fatalf("ACKs: %d then %d, want 1 then 1 (re-ACK of duplicates)", len(first), len(re))
	}
	if psn := parse(t, re[0]).BTH.PSN(); psn != 52 {
		t.Fatalf("re-ACK PSN %d, want 52 (last executed)", psn)
	}
	if s := p.b.Stats(); s.RxDuplicates != 3 {
		t.Fatalf("RxDuplicates %d, want 3", s.RxDuplicates)
	}
}

func TestQPTimeoutGoBackN(t *testing.T) {
	ca, cb := qpConfigs(256, 10, 20)
	p := newPair(t, ca, cb)
	_ = p.a.PostSend(WorkRequest{ID: 1, Data: msg(1, 700)}) // 3 packets
	fs := p.take(p.a)
	at, ok := p.a.NextTimeout()
	if !ok || at != LocalACKTimeout(10) {
		t.Fatalf("timer at %v,%v, want %v", at, ok, LocalACKTimeout(10))
	}
	if LocalACKTimeout(10) != 4194304*time.Nanosecond {
		t.Fatalf("4.096us<<10 = %v", LocalACKTimeout(10))
	}
	// Deliver only the first packet; its ACK is never requested.
	_ = p.b.Receive(p.now, fs[0])
	p.now = at - 1
	p.a.HandleTimeout(p.now)
	if len(p.take(p.a)) != 0 {
		t.Fatal("retransmitted before the timeout")
	}
	p.now = at
	p.a.HandleTimeout(p.now)
	re := p.take(p.a)
	if len(re) != 3 || parse(t, re[0]).BTH.PSN() != 10 {
		t.Fatalf("timeout resent %d frames", len(re))
	}
	for _, f := range re {
		_ = p.b.Receive(p.now, f)
	}
	for _, f := range p.take(p.b) {
		_ = p.a.Receive(p.now, f)
	}
	p.collect()
	if len(p.got[1]) != 1 || len(p.got[0]) != 1 || p.a.Stats().Timeouts != 1 {
		t.Fatalf("after timeout recovery: %d delivered, %d completed, stats %+v", len(p.got[1]), len(p.got[0]), p.a.Stats())
	}
}

func TestQPRetryExhaustion(t *testing.T) {
	ca, cb := qpConfigs(256, 10, 20)
	ca.RetryCount = 3
	p := newPair(t, ca, cb)
	for i := 0; i < 3; i++ {
		_ = p.a.PostSend(WorkRequest{ID: uint64(i), Data: msg(i, 10)})
	}
	sent := 0
	for i := 0; i < 10 && p.a.State() == StateRTS; i++ {
		sent += len(p.take(p.a)) // every frame lost
		at, ok := p.a.NextTimeout()
		if !ok {
			t.Fatal("no timer armed with frames outstanding")
		}
		p.now = at
		p.a.HandleTimeout(p.now)
	}
	if p.a.State() != StateError || p.a.Err() != ErrRetryExceeded {
		t.Fatalf("state %v err %v, want Error / retry exceeded", p.a.State(), p.a.Err())
	}
	if sent != 3*(1+3) {
		t.Fatalf("sent %d frames, want 12 (initial + 3 retries)", sent)
	}
	p.collect()
	want := []Status{StatusRetryExceeded, StatusFlushed, StatusFlushed}
	if len(p.got[0]) != 3 {
		t.Fatalf("%d completions, want 3", len(p.got[0]))
	}
	for i, c := range p.got[0] {
		if c.Status != want[i] || c.WRID != uint64(i) {
			t.Fatalf("completion %d: %+v", i, c)
		}
	}
	if err := p.a.PostSend(WorkRequest{}); err != ErrQPError {
		t.Fatalf("PostSend in error state: %v", err)
	}
	if len(p.take(p.a)) != 0 {
		t.Fatal("QP in error state transmits")
	}
}

func TestQPRemoteAccessError(t *testing.T) {
	ca, cb := qpConfigs(256, 10, 20)
	p := newPair(t, ca, cb)
	_ = p.a.PostSend(WorkRequest{ID: 9, Op: WRWrite, Data: msg(1, 10), RemoteAddr: 0, RKey: 0xBAD})
	p.run(100, func() bool { return p.a.State() == StateError })
	if p.a.Err() != ErrRemoteAccess || p.b.Err() != ErrLocalAccess {
		t.Fatalf("requester err %v, responder err %v", p.a.Err(), p.b.Err())
	}
	if len(p.got[0]) != 1 || p.got[0][0].Status != StatusRemoteAccessError {
		t.Fatalf("completions %+v", p.got[0])
	}
}

func TestQPBadICRCDropped(t *testing.T) {
	ca, cb := qpConfigs(256, 10, 20)
	p := newPair(t, ca, cb)
	_ = p.a.PostSend(WorkRequest{ID: 1, Data: msg(1, 10)})
	f := p.take(p.a)[0]
	f[50] ^= 0x10
	if err := p.b.Receive(p.now, f); err != ErrBadICRC {
		t.Fatalf("Receive = %v, want ErrBadICRC", err)
	}
	p.collect()
	if len(p.got[1]) != 0 || p.b.Stats().RxBadICRC != 1 {
		t.Fatal("frame with bad ICRC delivered or not counted")
	}
	if len(p.take(p.b)) != 0 {
		t.Fatal("frame with bad ICRC acknowledged")
	}
}

func TestQPWindowBound(t *testing.T) {
	ca, cb := qpConfigs(256, 10, 20)
	ca.MaxUnacked = 8
	p := newPair(t, ca, cb)
	_ = p.a.PostSend(WorkRequest{ID: 1, Data: msg(1, 256*20)})
	fs := p.take(p.a)
	if len(fs) != 8 {
		t.Fatalf("sent %d packets with MaxUnacked 8", len(fs))
	}
	if !parse(t, fs[7]).BTH.AckReq() {
		t.Fatal("packet filling the window does not request an ACK")
	}
	p.run(1000, func() bool { return p.a.Outstanding() == 0 })
	if len(p.got[1]) != 1 || !bytes.Equal(p.got[1][0].Data, msg(1, 256*20)) {
		t.Fatal("multi-window message not delivered intact")
	}
}

func TestQPBadConfig(t *testing.T) {
	ca, _ := qpConfigs(256, 0, 0)
	for _, mut := range []func(*Config){
		func(c *Config) { c.MTU = 1500 },
		func(c *Config) { c.QPN = 1 },
		func(c *Config) { c.RemoteQPN = 0 },
		func(c *Config) { c.Timeout = 32 },
		func(c *Config) { c.RetryCount = 8 },
	} {
		c := ca
		mut(&c)
		if _, err := NewQP(c); err == nil {
			t.Errorf("NewQP accepted %+v", c)
		}
	}
}

// TestQPLossyChannel runs both directions over the test channel with loss,
// duplication and reordering across a PSN wrap and checks exactly-once,
// in-order delivery.
// TestPollTransmitDeferred: over a lossy, duplicating, reordering channel
// a QP whose frames are taken without their ICRC and sealed afterwards
// (PollTransmitDeferred, SealICRC) sends byte for byte the frames of one
// whose PollTransmit writes it.
func TestPollTransmitDeferred(t *testing.T) {
	var runs [2][][]byte
	for k, deferred := range []bool{false, true} {
		ca, cb := qpConfigs(256, 100, 200)
		ca.MaxUnacked, cb.MaxUnacked = 16, 16
		p := newPair(t, ca, cb)
		p.loss, p.dup, p.reord = 0.05, 0.05, 0.05
		p.deferred, p.log = deferred, true
		for i := range 300 {
			for _, q := range []*QP{p.a, p.b} {
				if err := q.PostSend(WorkRequest{ID: uint64(i), Op: WRSendImm, Imm: uint32(i), Data: msg(i, 4+(i*37)%600)}); err != nil {
					t.Fatal(err)
				}
			}
			p.run(4, func() bool { return false })
		}
		p.run(100000, func() bool { return len(p.got[0]) >= 600 && len(p.got[1]) >= 600 })
		runs[k] = p.sent
	}
	if len(runs[0]) < 600 || len(runs[0]) != len(runs[1]) {
		t.Fatalf("%d frames sent, %d deferred", len(runs[0]), len(runs[1]))
	}
	for i := range runs[0] {
		if !bytes.Equal(runs[0][i], runs[1][i]) {
			t.Fatalf("frame %d differs once deferred:\n%x\n%x", i, runs[0][i], runs[1][i])
		}
	}
}

func TestQPLossyChannel(t *testing.T) {
	n := 20000
	if testing.Short() || raceEnabled {
		n = 3000
	}
	ca, cb := qpConfigs(256, PSNMask-uint32(n/2), PSNMask-100)
	ca.MaxUnacked, cb.MaxUnacked = 32, 32
	p := newPair(t, ca, cb)
	p.loss, p.dup, p.reord = 0.05, 0.05, 0.05
	posted := [2]int{}
	post := func() {
		for i, q := range []*QP{p.a, p.b} {
			for posted[i] < n && q.Outstanding() < 64 {
				size := 1 + (posted[i]*37)%600
				if err := q.PostSend(WorkRequest{ID: uint64(posted[i]), Op: WRSendImm, Imm: uint32(posted[i]), Data: msg(posted[i], max(4, size))}); err != nil {
					t.Fatal(err)
				}
				posted[i]++
			}
		}
	}
	for step := 0; step < 10*n; step++ {
		post()
		p.run(1, func() bool { return false })
		if len(p.got[0]) >= 2*n && len(p.got[1]) >= 2*n {
			break
		}
	}
	for side := 0; side < 2; side++ {
		var sends, recvs int
		for _, c := range p.got[side] {
			switch c.Opcode {
			case CompSend:
				if c.WRID != uint64(sends) || c.Status != StatusSuccess {
					t.Fatalf("side %d: send completion %d is %+v", side, sends, c)
				}
				sends++
			case CompRecv:
				if c.Imm != uint32(recvs) || binary.BigEndian.Uint32(c.Data) != uint32(recvs) {
					t.Fatalf("side %d: message %d delivered as %d (out of order or twice)", side, recvs, c.Imm)
				}
				recvs++
			}
		}
		if sends != n || recvs != n {
			t.Fatalf("side %d: %d sends completed, %d messages received, want %d", side, sends, recvs, n)
		}
	}
	if p.a.SendPSN() >= ca.SendPSN || p.b.SendPSN() >= cb.SendPSN {
		t.Fatal("PSN did not wrap")
	}
	sa := p.a.Stats()
	if sa.TxRetransmits == 0 || p.b.Stats().RxDuplicates == 0 || p.b.Stats().RxOutOfSequence == 0 {
		t.Fatalf("impairments had no effect: %+v", sa)
	}
}

func TestQPRNRNAK(t *testing.T) {
	ca, cb := qpConfigs(256, 10, 20)
	ca.RNRRetry = 1
	p := newPair(t, ca, cb)
	_ = p.a.PostSend(WorkRequest{ID: 1, Data: msg(1, 10)})
	_ = p.a.PostSend(WorkRequest{ID: 2, Data: msg(2, 10)})
	if n := len(p.take(p.a)); n != 2 {
		t.Fatalf("sent %d", n)
	}
	rnr := func(psn uint32) []byte {
		h := FrameHeader{Src: epB, Dst: epA, DestQP: 0x11, Opcode: OpAck, PSN: psn, Syndrome: SyndromeRNRNAK | 3}
		b := make([]byte, h.Len(0))
		n, _ := h.Encode(b, nil)
		return b[:n]
	}
	// RNR NAK for PSN 11: PSN 10 is implicitly acknowledged, 11 waits 30 µs.
	_ = p.a.Receive(p.now, rnr(11))
	p.collect()
	if len(p.got[0]) != 1 || p.got[0][0].WRID != 1 {
		t.Fatalf("completions %+v, want WR 1", p.got[0])
	}
	if len(p.take(p.a)) != 0 {
		t.Fatal("transmitted during the RNR wait")
	}
	at, ok := p.a.NextTimeout()
	if !ok || at != RNRDelay(3) || RNRDelay(3) != 30*time.Microsecond {
		t.Fatalf("RNR timer %v %v", at, ok)
	}
	p.now = at
	p.a.HandleTimeout(p.now)
	re := p.take(p.a)
	if len(re) != 1 || parse(t, re[0]).BTH.PSN() != 11 {
		t.Fatalf("after the RNR wait resent %d frames", len(re))
	}
	// A second RNR NAK exhausts RNRRetry=1.
	_ = p.a.Receive(p.now, rnr(11))
	if p.a.State() != StateError || p.a.Err() != ErrRNRRetryExceeded {
		t.Fatalf("state %v err %v", p.a.State(), p.a.Err())
	}
	p.collect()
	if c := p.got[0][len(p.got[0])-1]; c.WRID != 2 || c.Status != StatusRNRRetryExceeded {
		t.Fatalf("last completion %+v", c)
	}
}

func TestQPECNCounted(t *testing.T) {
	ca, cb := qpConfigs(256, 10, 20)
	ca.TOS = 2 // ECT(0)
	p := newPair(t, ca, cb)
	_ = p.a.PostSend(WorkRequest{ID: 1, Data: msg(1, 10)})
	f := p.take(p.a)[0]
	if f[15]&3 != 2 {
		t.Fatalf("TOS %#x, want ECT(0)", f[15])
	}
	f[15] |= 3 // a switch marks CE: ICRC-neutral
	if err := p.b.Receive(p.now, f); err != nil {
		t.Fatal(err)
	}
	if p.b.Stats().RxCE != 1 || p.b.Stats().MessagesReceived != 1 {
		t.Fatalf("stats %+v", p.b.Stats())
	}
}

// TestQPTimeoutStretch: TimeoutStretch multiplies the local ACK timeout (a
// scaled emulation's time dilation); a negative or absurd one is refused.
func TestQPTimeoutStretch(t *testing.T) {
	ca, cb := qpConfigs(256, 10, 20)
	ca.TimeoutStretch = 100
	p := newPair(t, ca, cb)
	_ = p.a.PostSend(WorkRequest{ID: 1, Data: msg(1, 700)})
	p.take(p.a)
	if at, ok := p.a.NextTimeout(); !ok || at != 100*LocalACKTimeout(10) {
		t.Fatalf("timer at %v,%v, want %v", at, ok, 100*LocalACKTimeout(10))
	}
	if d := ca.ACKTimeout(); d != 100*LocalACKTimeout(10) {
		t.Errorf("ACKTimeout %v, want %v", d, 100*LocalACKTimeout(10))
	}
	if z := (Config{TimeoutStretch: 100}); z.ACKTimeout() != 0 {
		t.Errorf("no timer: ACKTimeout %v, want 0", z.ACKTimeout())
	}
	for _, s := range []float64{-1, math.NaN(), math.Inf(1)} {
		ca.TimeoutStretch = s
		if _, err := NewQP(ca); err != ErrBadConfig {
			t.Errorf("stretch %v: %v, want ErrBadConfig", s, err)
		}
	}
}
