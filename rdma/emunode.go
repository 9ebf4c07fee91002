package rdma

import (
	"time"

	"inabox/emu"
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
	// OnCompletion, if set, receives every completion. c.Data is valid only
	// during the call. It may post work requests.
	OnCompletion func(env *emu.Env, qp *QP, c *Completion)

	// UnknownQP counts frames for no hosted QP; Dropped counts frames a QP
	// refused (bad ICRC, malformed, ...; see each QP's Stats).
	UnknownQP, Dropped uint64

	armed []time.Duration // timer deadline armed per QP, -1 if none
}

var _ emu.Node = (*Host)(nil)

// NewHost returns a host for qps on port 0.
func NewHost(qps ...*QP) *Host { return &Host{QPs: qps} }

// Start implements emu.Node.
func (h *Host) Start(env *emu.Env) {
	h.armed = make([]time.Duration, len(h.QPs))
	for i := range h.armed {
		h.armed[i] = -1
	}
	if h.OnStart != nil {
		h.OnStart(env, h)
	}
	h.flush(env)
}

// Receive implements emu.Node.
func (h *Host) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	now := env.Now()
	for _, p := range pkts {
		b := p.Bytes()
		qp := h.lookup(b)
		if qp == nil {
			h.UnknownQP++
		} else {
			if qp.Receive(now, b) != nil {
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
		h.armed[key] = -1
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
			h.OnCompletion(env, qp, &c)
		}
	}
}

// flush sends every QP's pending frames and re-arms timers.
func (h *Host) flush(env *emu.Env) {
	now := env.Now()
	for i, qp := range h.QPs {
		for {
			p := env.NewPacket()
			p.SetLen(qp.MaxFrameLen())
			n := qp.PollTransmit(now, p.Bytes())
			if n == 0 {
				env.Free(p)
				break
			}
			p.SetLen(n)
			env.Send(h.Port, p)
		}
		h.drain(env, qp)
		at, ok := qp.NextTimeout()
		switch {
		case ok && at != h.armed[i]:
			env.SetTimer(at, uint64(i))
			h.armed[i] = at
		case !ok && h.armed[i] >= 0:
			env.StopTimer(uint64(i))
			h.armed[i] = -1
		}
	}
}
