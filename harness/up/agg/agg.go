// Package agg is a minimal INA all-reduce client for the process runtime:
// a Worker node that streams an int32 tensor through the aggregation
// switch's INA path (one RC SEND Only frame with an INA header per chunk)
// and collects the multicast results, and a PS node that counts what the
// switch sends it. Both are plain emu.Nodes, so they run unchanged under
// virtual time; the FreeINA worker and parameter server of host/ are meant
// to replace them behind the same process runtime.
package agg

import (
	"encoding/binary"
	"net/netip"
	"time"

	"inabox/emu"
	"inabox/rdma"
	"inabox/switch/inahdr"
)

// Value is the deterministic test tensor: element i of worker w's
// contribution for a job. Values lie in [-1000, 1000], so sums over up to
// 32 workers never saturate.
func Value(seed uint64, w int, i int) int32 {
	x := uint64(i)*0x9E3779B97F4A7C15 ^ (uint64(w)+1)*0xBF58476D1CE4E5B9 ^ seed*0x94D049BB133111EB
	x ^= x >> 31
	x *= 0xD6E8FEB86659FD3B
	x ^= x >> 29
	return int32(x%2001) - 1000
}

// QP returns the queue pair number worker w of job uses (and that the
// switch's ina_worker table is keyed on); PS uses w = 0xFF.
func QP(job uint16, w uint8) uint32 { return 0x100000 | uint32(job)<<8 | uint32(w) }

// MAC and IP give worker w (or the PS, w = 0xFF) and the switch (w = 0xFE)
// their addresses.
func MAC(w uint8) [6]byte            { return [6]byte{0x02, 0x1A, 0, 0, 0, w} }
func IP(w uint8) netip.Addr          { return netip.AddrFrom4([4]byte{10, 77, 0, w}) }
func Endpoint(w uint8) rdma.Endpoint { return rdma.Endpoint{MAC: MAC(w), IP: IP(w)} }

// SwitchID is the address index of the switch (the destination of every
// contribution).
const SwitchID = 0xFE

// PSID is the address index of the parameter server.
const PSID = 0xFF

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	Job       uint16
	AllReduce uint16
	Worker    uint8
	Seed      uint64 // seeds Value
	// Values is the tensor length (int32 elements); PerPacket values go in
	// each chunk (the last chunk may be shorter).
	Values, PerPacket int
	// Window is the most chunks in flight beyond the lowest unfinished one.
	// With the Static policy it must be at most half the job's aggregators.
	Window int
	// RTO is the retransmission timeout of a chunk without a result.
	RTO  time.Duration
	Port int // node port
}

// WorkerStats are a Worker's counters.
type WorkerStats struct {
	Chunks      int           `json:"chunks"`
	Sent        uint64        `json:"sent"`
	Resent      uint64        `json:"resent"`
	Results     uint64        `json:"results"`
	DupResults  uint64        `json:"dup_results"`
	BadICRC     uint64        `json:"bad_icrc"`
	Ignored     uint64        `json:"ignored"`
	Overflow    uint64        `json:"overflow"`
	Done        bool          `json:"done"`
	DoneAt      time.Duration `json:"done_at_ns"`
	FirstSendAt time.Duration `json:"first_send_at_ns"`
}

// Worker contributes Value(seed, worker, i) for i < Values and collects the
// sums into Result.
type Worker struct {
	cfg    WorkerConfig
	hdr    rdma.FrameHeader
	chunks int
	// Result is the all-reduced tensor (valid when Stats().Done).
	Result []int32
	got    []bool
	sentAt []time.Duration
	base   int // lowest chunk without a result
	next   int // next chunk never sent
	left   int
	stats  WorkerStats
	pay    []byte
	armed  bool
}

var _ emu.Node = (*Worker)(nil)

// NewWorker returns a worker node.
func NewWorker(cfg WorkerConfig) *Worker {
	if cfg.PerPacket <= 0 {
		cfg.PerPacket = 256
	}
	if cfg.Window <= 0 {
		cfg.Window = 64
	}
	if cfg.RTO <= 0 {
		cfg.RTO = 20 * time.Millisecond
	}
	n := (cfg.Values + cfg.PerPacket - 1) / cfg.PerPacket
	w := &Worker{cfg: cfg, chunks: n, Result: make([]int32, cfg.Values), got: make([]bool, n),
		sentAt: make([]time.Duration, n), left: n, pay: make([]byte, inahdr.Len+4*cfg.PerPacket)}
	w.stats.Chunks = n
	w.hdr = rdma.FrameHeader{Src: Endpoint(cfg.Worker), Dst: Endpoint(SwitchID), SrcPort: rdma.SourcePort(QP(cfg.Job, cfg.Worker)),
		TOS: 2, Opcode: rdma.OpSendOnly, DestQP: QP(cfg.Job, cfg.Worker)}
	if n == 0 {
		w.stats.Done = true
	}
	return w
}

// Stats returns the counters (call on the run goroutine or after the run).
func (w *Worker) Stats() WorkerStats { return w.stats }

// Done reports whether every chunk's sum has arrived.
func (w *Worker) Done() bool { return w.stats.Done }

const rtoTimer = 1

// Start implements emu.Node.
func (w *Worker) Start(env *emu.Env) {
	w.stats.FirstSendAt = env.Now()
	w.fill(env)
}

func (w *Worker) fill(env *emu.Env) {
	for w.next < w.chunks && w.next < w.base+w.cfg.Window {
		w.send(env, w.next, 0)
		w.next++
	}
	if !w.armed && w.left > 0 {
		env.SetTimer(env.Now()+w.cfg.RTO/2, rtoTimer)
		w.armed = true
	}
}

func (w *Worker) send(env *emu.Env, c int, flags uint8) {
	lo := c * w.cfg.PerPacket
	hi := min(lo+w.cfg.PerPacket, w.cfg.Values)
	h := inahdr.Header(w.pay)
	h.Encode(inahdr.Meta{Flags: flags, Job: w.cfg.Job, AllReduce: w.cfg.AllReduce, Count: hi - lo,
		Chunk: uint32(c), Worker: w.cfg.Worker, Bitmap: 1 << w.cfg.Worker})
	for i := lo; i < hi; i++ {
		binary.BigEndian.PutUint32(w.pay[inahdr.Len+4*(i-lo):], uint32(Value(w.cfg.Seed, int(w.cfg.Worker), i)))
	}
	payload := w.pay[:inahdr.Len+4*(hi-lo)]
	p := env.NewPacket()
	w.hdr.PSN = uint32(c) & 0xFFFFFF
	p.SetLen(w.hdr.Len(len(payload)))
	n, err := w.hdr.Encode(p.Bytes(), payload)
	if err != nil {
		env.Free(p)
		return
	}
	p.SetLen(n)
	env.Send(w.cfg.Port, p)
	w.sentAt[c] = env.Now()
	if flags&inahdr.FlagResend != 0 {
		w.stats.Resent++
	} else {
		w.stats.Sent++
	}
}

// Receive implements emu.Node.
func (w *Worker) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	for _, p := range pkts {
		w.receive(env.Now(), p.Bytes())
		env.Free(p)
	}
	w.fill(env)
}

func (w *Worker) receive(now time.Duration, b []byte) {
	var f rdma.Frame
	if f.Parse(b) != nil || f.BTH.DestQP() != QP(w.cfg.Job, w.cfg.Worker) {
		w.stats.Ignored++
		return
	}
	if !rdma.CheckICRC(b) {
		w.stats.BadICRC++
		return
	}
	h := inahdr.Header(f.Payload)
	if h.Validate() != nil || h.Flags()&inahdr.FlagResult == 0 || h.Job() != w.cfg.Job || h.AllReduce() != w.cfg.AllReduce {
		w.stats.Ignored++
		return
	}
	c := int(h.Chunk())
	lo := c * w.cfg.PerPacket
	if c >= w.chunks || h.Count() != min(lo+w.cfg.PerPacket, w.cfg.Values)-lo {
		w.stats.Ignored++
		return
	}
	if w.got[c] {
		w.stats.DupResults++
		return
	}
	if h.Has(inahdr.FlagOverflow) {
		w.stats.Overflow++
	}
	for i := 0; i < h.Count(); i++ {
		w.Result[lo+i] = h.Value(i)
	}
	w.got[c] = true
	w.stats.Results++
	w.left--
	for w.base < w.chunks && w.got[w.base] {
		w.base++
	}
	if w.left == 0 {
		w.stats.Done = true
		w.stats.DoneAt = now
	}
}

// Timer implements emu.Node: retransmit chunks in the window whose result
// is overdue (FlagResend; the switch's bitmap drops duplicates and resends
// a stored result).
func (w *Worker) Timer(env *emu.Env, key uint64) {
	if key != rtoTimer {
		return
	}
	w.armed = false
	now := env.Now()
	for c := w.base; c < w.next; c++ {
		if !w.got[c] && now-w.sentAt[c] >= w.cfg.RTO {
			w.send(env, c, inahdr.FlagResend)
		}
	}
	w.fill(env)
}

// PSStats count what reached the parameter server.
type PSStats struct {
	Frames     uint64 `json:"frames"`
	INA        uint64 `json:"ina"`
	Collisions uint64 `json:"collisions"`
	Partials   uint64 `json:"partials"`
	Results    uint64 `json:"results"`
	Other      uint64 `json:"other"`
}

// PS is a placeholder parameter server: it counts the INA frames the switch
// hands it (collisions, partial sums, results with ResultToPS) and frees
// them. The FreeINA PS of host/ replaces it.
type PS struct {
	stats PSStats
}

var _ emu.Node = (*PS)(nil)

// Stats returns the counters.
func (s *PS) Stats() PSStats { return s.stats }

// Start implements emu.Node.
func (s *PS) Start(env *emu.Env) {}

// Timer implements emu.Node.
func (s *PS) Timer(env *emu.Env, key uint64) {}

// Receive implements emu.Node.
func (s *PS) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	for _, p := range pkts {
		s.stats.Frames++
		var f rdma.Frame
		if f.Parse(p.Bytes()) == nil && inahdr.Header(f.Payload).Validate() == nil {
			h := inahdr.Header(f.Payload)
			s.stats.INA++
			switch {
			case h.Has(inahdr.FlagCollision):
				s.stats.Collisions++
			case h.Has(inahdr.FlagPartial):
				s.stats.Partials++
			case h.Has(inahdr.FlagResult):
				s.stats.Results++
			}
		} else {
			s.stats.Other++
		}
		env.Free(p)
	}
}
