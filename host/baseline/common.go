// Package baseline implements the comparison points of FreeINA on the same
// emulator, switch and host code (issue 5): no INA (a parameter server
// alone, PS-only, and a host ring all-reduce, policy "none"), and three INA
// clients that drive the switch's built-in slot stages — SwitchML
// ("switchml": static slots with shadow copies, per-chunk retransmission
// timers, a self-clocked window), ATP ("atp": hashed best-effort
// aggregators, results through the PS, PS fallback, timeout-based loss
// recovery) and ESA ("esa": ATP with priority preemption). Every node is a
// deterministic emu.Node that gets every address through its
// configuration; harness/testbed builds the testbed the same way for every
// baseline (one adapter each). The protocols are described in README.md
// next to this file.
package baseline

import (
	"time"

	"github.com/inabox/inabox/emu"
	"github.com/inabox/inabox/host"
	"github.com/inabox/inabox/rdma"
	"github.com/inabox/inabox/switch/inahdr"
)

// Report is a worker's account of one all-reduce (host.Report, shared by
// every client).
type Report = host.Report

// clientBase is what every baseline worker shares: the worker core
// (tensors, quantization, results, reports) and the timeline of its
// all-reduces.
type clientBase struct {
	host.Core
	tl      host.Timeline
	cur     int
	active  bool // an all-reduce is in progress
	waiting bool // the gap timer is armed
	planned bool // at is the next all-reduce's start
	at      time.Duration
	now     time.Duration
}

const keyGap = 1 << 40

func (b *clientBase) init(job uint16, rank, n, values int, q host.Quantizer, tl host.Timeline, ts []host.Tensor) {
	q.Workers = n
	b.Core = host.NewCore(job, rank, n, values, q, ts)
	b.tl = tl
}

// Reset implements emu.Resetter: a crash that loses the worker's state
// (StateLost).
func (b *clientBase) Reset() { b.LoseState() }

// Restore puts a new worker where a checkpoint left a crashed one: reps
// are the all-reduces it had finished (host.Core.RestoreReports); it goes
// on with the next. Call it before the worker starts; a Reset (the
// crash's state loss) may follow, as emu's Restart resets a crashed node.
func (b *clientBase) Restore(reps []Report) {
	b.RestoreReports(reps)
	b.cur = len(reps)
}

// schedule arms the timer for the next all-reduce (when the timeline
// makes it ready), or reports true if it should begin now.
func (b *clientBase) schedule(env *emu.Env) bool {
	if b.active || b.waiting || b.cur >= b.Len() {
		return false
	}
	if !b.planned {
		b.at = b.NextReady(&b.tl)
		b.planned = true
	}
	if b.at <= b.now {
		b.planned = false
		return true
	}
	env.SetTimer(b.at, keyGap)
	b.waiting = true
	return false
}

// beginBase allocates the result of tensor cur and returns its report.
func (b *clientBase) beginBase() *Report {
	r := b.Begin(b.cur, b.now)
	b.active = true
	return &r
}

func (b *clientBase) finish(rep *Report) {
	b.Finish(*rep, b.now)
	b.active = false
	b.cur++
}

// ucHeader returns the header of a UC SEND Only frame from src's QP
// srcQPN to dst's QP destQP.
func ucHeader(src, dst rdma.Endpoint, destQP, srcQPN uint32, psn uint32) rdma.FrameHeader {
	return rdma.FrameHeader{Src: src, Dst: dst, Opcode: rdma.OpUCSendOnly, DestQP: destQP,
		SrcPort: rdma.SourcePort(srcQPN), PSN: psn & rdma.PSNMask, TOS: 2}
}

// ucSend builds a UC SEND Only frame carrying payload and sends it on
// port 0.
func ucSend(env *emu.Env, src, dst rdma.Endpoint, destQP, srcQPN uint32, psn uint32, payload []byte) {
	fh := ucHeader(src, dst, destQP, srcQPN, psn)
	p := env.NewPacket()
	p.SetLen(fh.Len(len(payload)))
	n, err := host.EncodeSealed(env, p, &fh, p.Bytes(), payload)
	if err != nil {
		env.Free(p)
		return
	}
	p.SetLen(n)
	env.Send(0, p)
}

// inaHeader returns the INA header at pl if it is one with its values.
func inaHeader(pl []byte) (inahdr.Header, bool) {
	if len(pl) < inahdr.Len || pl[0] != inahdr.Version {
		return nil, false
	}
	h := inahdr.Header(pl)
	if len(pl) < h.Size() {
		return nil, false
	}
	return h, true
}
