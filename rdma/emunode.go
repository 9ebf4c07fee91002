package rdma

import (
	"time"

	"github.com/inabox/inabox/emu"
)

// Host is an emu.Node hosting a set of QPs behind one port: a RoCEv2 NIC.
// Incoming frames go to the QP named by their BTH DestQP; after every event
// the host drains each QP's transmissions onto the port, hands completions to
// OnCompletion and re-arms the QP's timer.
type Host struct {
	// Port is the node port the NIC uses.
	Port int
	// QPs are the hosted queue pairs; a QP's index is its timer key.
	QPs []*QP
	// OnStart, if set, runs when the emulator starts the node, before the
	// first transmissions are drained; it may post work requests.
	OnStart func(env *emu.Env, h *Host)
	// OnCompletion, if set, receives every completion. c and c.Data are
	// valid only during the call. It may post work requests.
	OnCompletion func(env *emu.Env, qp *QP, c *Completion)

	// UnknownQP counts frames for no hosted QP; Dropped counts frames a QP
	// refused (bad ICRC, malformed, ...; see each QP's Stats).
	UnknownQP, Dropped uint64

	timers []QPTimer  // per QP
	comp   Completion // the completion OnCompletion is handed
}

var _ emu.Node = (*Host)(nil)

// NewHost returns a host for qps on port 0.
func NewHost(qps ...*QP) *Host { return &Host{QPs: qps} }

// Start implements emu.Node.
func (h *Host) Start(env *emu.Env) {
	h.timers = make([]QPTimer, len(h.QPs))
	if h.OnStart != nil {
		h.OnStart(env, h)
	}
	h.flush(env)
}

// AcceptsDeferred implements emu.DeferAware: its QPs trust a sealed
// frame's ICRC (QP.ReceiveSealed).
func (h *Host) AcceptsDeferred() bool { return true }

// Receive implements emu.Node.
func (h *Host) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	now := env.Now()
	for _, p := range pkts {
		b := p.Bytes()
		qp := h.lookup(b)
		if qp == nil {
			h.UnknownQP++
		} else {
			if qp.ReceiveSealed(now, b, p.Sealed) != nil {
				h.Dropped++
			}
			h.drain(env, qp)
		}
		env.Free(p)
	}
	h.flush(env)
}

// Timer implements emu.Node.
func (h *Host) Timer(env *emu.Env, key uint64) {
	if key < uint64(len(h.QPs)) {
		h.timers[key].Expired()
		qp := h.QPs[key]
		qp.HandleTimeout(env.Now())
		h.drain(env, qp)
	}
	h.flush(env)
}

func (h *Host) lookup(frame []byte) *QP {
	if len(frame) < HeadersLen+BTHLen {
		return nil
	}
	qpn := BTH(frame[HeadersLen:]).DestQP()
	for _, q := range h.QPs {
		if q.cfg.QPN == qpn {
			return q
		}
	}
	return nil
}

func (h *Host) drain(env *emu.Env, qp *QP) {
	for {
		c, ok := qp.PollCompletion()
		if !ok {
			return
		}
		if h.OnCompletion != nil {
			h.comp = c // not &c: it would escape, one allocation per completion
			h.OnCompletion(env, qp, &h.comp)
		}
	}
}

// flush sends every QP's pending frames and re-arms timers.
func (h *Host) flush(env *emu.Env) {
	for i, qp := range h.QPs {
		FlushQP(env, h.Port, qp, uint64(i), &h.timers[i])
	}
}

// QPTimer is the emulator timer an emu.Node keeps for one QP's timeouts
// (FlushQP): the deadline it is set to, if any. The zero value is not set;
// a node resets it in Start (a restart cancels every timer).
type QPTimer struct {
	at time.Duration
	on bool
	// qp and ver: the QP and its version (QP.ver) when FlushQP last left
	// it with nothing to send and this timer at its next timeout.
	qp  *QP
	ver uint64
	// buf holds a frame from PollTransmit until FlushQP copies it into a
	// packet of its size (PollTransmit needs room for a full MTU; a packet
	// that size for every ACK would touch 9 KiB to send 60 bytes).
	buf []byte
}

// Expired records that the timer has fired, so that FlushQP sets it again
// even for the same deadline.
func (t *QPTimer) Expired() { t.on, t.qp = false, nil }

// FlushQP is the output half of driving a QP from an emu.Node: it sends on
// port every frame qp has to send at env.Now(), then sets the node's timer
// key to qp's next timeout, or stops it when qp has none; t is that timer's
// state. Call it after every input (PostSend, Receive, HandleTimeout) once
// the completions those produced are drained: PollTransmit completes
// nothing, so no completion is pending afterwards. It allocates nothing
// after its first call for a QP (frames go into the emulator's pooled
// packets, each sized to its frame). A flush with no input to qp since the
// last one (as a node that flushes after every batch often makes) returns
// at once: it would send nothing and leave the timer as it is.
func FlushQP(env *emu.Env, port int, qp *QP, key uint64, t *QPTimer) {
	if t.qp == qp && t.ver == qp.ver {
		return // no input since the last flush: nothing to send, the timer as it was
	}
	now := env.Now()
	if len(t.buf) < qp.MaxFrameLen() {
		t.buf = make([]byte, qp.MaxFrameLen())
	}
	deferred := env.Defers()
	for {
		var n int
		if deferred {
			n = qp.PollTransmitDeferred(now, t.buf)
		} else {
			n = qp.PollTransmit(now, t.buf)
		}
		if n == 0 {
			break
		}
		p := env.NewPacket()
		p.SetBytes(t.buf[:n])
		if deferred {
			p.Defer(SealICRC)
		} else {
			p.Sealed = true // PollTransmit wrote its ICRC
		}
		env.Send(port, p)
	}
	at, ok := qp.NextTimeout()
	switch {
	case ok && (!t.on || at != t.at):
		env.SetTimer(at, key)
		t.at, t.on = at, true
	case !ok && t.on:
		env.StopTimer(key)
		t.on = false
	}
	t.qp, t.ver = qp, qp.ver
}
