// Package nodes has small ready-made emulator nodes: a traffic generator and
// sink that sends real Ethernet/IPv4/UDP frames with sequence numbers and
// checks what it receives, and a learning Ethernet switch. They serve the
// emulator's own tests, the default scenario, and users' fault-injection
// tests.
package nodes

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/inabox/inabox/emu"
)

// Frame layout written by Traffic (all big-endian):
//
//	0                   1                   2                   3
//	0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+---------------------------------------------------------------+
//	| Ethernet (14) | IPv4 (20, ECT(0) if ECN) | UDP (8, checksummed)|
//	+---------------------------------------------------------------+
//	|                  sequence number (64 bits)                    |
//	+---------------------------------------------------------------+
//	|                   pattern bytes (i & 0xff)...                 |
//	+---------------------------------------------------------------+
const (
	ethLen  = 14
	ipLen   = 20
	udpLen  = 8
	hdrLen  = ethLen + ipLen + udpLen
	seqLen  = 8
	MinSize = hdrLen + seqLen // smallest frame Traffic sends
)

// Endpoint is an L2/L3 address.
type Endpoint struct {
	MAC  [6]byte
	IP   netip.Addr
	Port uint16
}

// TrafficConfig configures a Traffic node.
type TrafficConfig struct {
	Local, Remote Endpoint
	// Count frames of FrameBytes each are sent, the first at Start, then one
	// every Interval (0: all at Start, back to back; the link paces them).
	Count      int
	FrameBytes int
	Start      time.Duration
	Interval   time.Duration
	// ECN marks frames ECT(0) so links may mark them CE.
	ECN bool
	// Port is the node port to send on (default 0).
	Port int
}

// TrafficStats is what a Traffic node saw.
type TrafficStats struct {
	Sent              int
	Received          int // valid frames for this endpoint, duplicates included
	Unique            int
	Duplicates        int
	Reordered         int // arrived with a sequence number below one seen before
	Corrupt           int // failed the UDP checksum or the pattern check
	CEMarked          int
	ReceivedBytes     uint64
	FirstRx, LastRx   time.Duration
	MaxSeq            uint64
	SeqsInOrderPrefix uint64 // sequence numbers 0..n-1 all received
}

// Traffic sends numbered UDP frames to a peer and checks the ones it
// receives. It is a deterministic emu.Node.
type Traffic struct {
	cfg  TrafficConfig
	next int
	seen map[uint64]bool
	st   TrafficStats
	max  uint64
	any  bool

	scratch *emu.Packet // frame rebuilt to check a received one
	peer    *Traffic

	// tmpl is frame 0 as build writes it for tmplCfg, and tmplSum the raw
	// (unfolded) one's-complement sum of its UDP pseudo-header and segment
	// with a zero checksum: frame seq is tmpl with the sequence number,
	// IPv4 id and both checksums patched.
	tmpl    []byte
	tmplCfg TrafficConfig
	tmplSum uint32
}

// NewTraffic returns a Traffic node.
func NewTraffic(cfg TrafficConfig) *Traffic {
	if cfg.FrameBytes < MinSize {
		cfg.FrameBytes = MinSize
	}
	return &Traffic{cfg: cfg, seen: map[uint64]bool{}}
}

// Stats returns what the node has sent and received.
func (t *Traffic) Stats() TrafficStats {
	s := t.st
	for s.SeqsInOrderPrefix = 0; t.seen[s.SeqsInOrderPrefix]; s.SeqsInOrderPrefix++ {
	}
	s.MaxSeq = t.max
	return s
}

// Reset forgets everything (a crash loses the node's state).
func (t *Traffic) Reset() {
	t.next = 0
	t.seen = map[uint64]bool{}
	t.st = TrafficStats{}
	t.max, t.any = 0, false
}

const timerSend = 1

// Start implements emu.Node.
func (t *Traffic) Start(env *emu.Env) {
	if t.next < t.cfg.Count {
		env.SetTimer(t.cfg.Start, timerSend)
	}
}

// Timer implements emu.Node.
func (t *Traffic) Timer(env *emu.Env, key uint64) {
	if key != timerSend {
		return
	}
	for t.next < t.cfg.Count {
		p := env.NewPacket()
		t.build(p, uint64(t.next))
		env.Send(t.cfg.Port, p)
		t.next++
		t.st.Sent++
		if t.cfg.Interval > 0 {
			if t.next < t.cfg.Count {
				env.SetTimer(env.Now()+t.cfg.Interval, timerSend)
			}
			return
		}
	}
}

// build writes frame number seq into p, as Traffic sends it: a copy of
// frame 0 (built once per configuration) with the sequence number, the
// IPv4 id and the checksums patched.
func (t *Traffic) build(p *emu.Packet, seq uint64) {
	if t.tmpl == nil || t.tmplCfg != t.cfg {
		t.tmpl = make([]byte, t.cfg.FrameBytes)
		t.buildFull(t.tmpl, 0)
		t.tmplCfg = t.cfg
		udp := t.tmpl[ethLen+ipLen:]
		c0, c1 := udp[6], udp[7]
		udp[6], udp[7] = 0, 0
		t.tmplSum = rawSum(udp, pseudoSum(t.tmpl[ethLen:ethLen+ipLen], len(udp)))
		udp[6], udp[7] = c0, c1
	}
	p.SetLen(len(t.tmpl))
	b := p.Bytes()
	copy(b, t.tmpl)
	ip := b[ethLen:]
	binary.BigEndian.PutUint16(ip[4:6], uint16(seq))
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:12], Checksum(ip[:ipLen], 0))
	binary.BigEndian.PutUint64(b[hdrLen:hdrLen+8], seq)
	sum := t.tmplSum + uint32(seq>>48) + uint32(seq>>32&0xffff) + uint32(seq>>16&0xffff) + uint32(seq&0xffff)
	binary.BigEndian.PutUint16(b[ethLen+ipLen+6:], fold(sum))
}

// buildFull writes frame number seq into b (len(b) = FrameBytes) from
// scratch.
func (t *Traffic) buildFull(b []byte, seq uint64) {
	c := &t.cfg
	copy(b[0:6], c.Remote.MAC[:])
	copy(b[6:12], c.Local.MAC[:])
	binary.BigEndian.PutUint16(b[12:14], 0x0800)
	ip := b[ethLen:]
	ip[0] = 0x45
	ip[1] = 0
	if c.ECN {
		ip[1] = 2 // ECT(0)
	}
	binary.BigEndian.PutUint16(ip[2:4], uint16(c.FrameBytes-ethLen))
	binary.BigEndian.PutUint16(ip[4:6], uint16(seq))
	binary.BigEndian.PutUint16(ip[6:8], 0x4000) // DF
	ip[8] = 64
	ip[9] = 17
	ip[10], ip[11] = 0, 0
	s4, d4 := as4(c.Local.IP), as4(c.Remote.IP)
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	binary.BigEndian.PutUint16(ip[10:12], Checksum(ip[:ipLen], 0))
	udp := b[ethLen+ipLen:]
	binary.BigEndian.PutUint16(udp[0:2], c.Local.Port)
	binary.BigEndian.PutUint16(udp[2:4], c.Remote.Port)
	binary.BigEndian.PutUint16(udp[4:6], uint16(c.FrameBytes-ethLen-ipLen))
	udp[6], udp[7] = 0, 0
	pl := b[hdrLen:]
	binary.BigEndian.PutUint64(pl[0:8], seq)
	for i := seqLen; i < len(pl); i++ {
		pl[i] = byte(i)
	}
	binary.BigEndian.PutUint16(udp[6:8], udpChecksum(ip[:ipLen], b[ethLen+ipLen:]))
}

// Receive implements emu.Node.
func (t *Traffic) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	for _, p := range pkts {
		t.check(env.Now(), p.Bytes())
		env.Free(p)
	}
}

func (t *Traffic) check(now time.Duration, b []byte) {
	seq := uint64(1<<64 - 1)
	if len(b) >= MinSize {
		seq = binary.BigEndian.Uint64(b[hdrLen : hdrLen+8])
	}
	if !t.valid(b, seq) {
		t.st.Corrupt++
		return
	}
	t.st.Received++
	t.st.ReceivedBytes += uint64(len(b))
	if b[ethLen+1]&3 == 3 {
		t.st.CEMarked++
	}
	if t.st.Received == 1 {
		t.st.FirstRx = now
	}
	t.st.LastRx = now
	if t.seen[seq] {
		t.st.Duplicates++
		return
	}
	t.seen[seq] = true
	t.st.Unique++
	if t.any && seq < t.max {
		t.st.Reordered++
	}
	if !t.any || seq > t.max {
		t.max = seq
	}
	t.any = true
}

// valid reports whether b is exactly frame seq as the peer builds it, but for
// ECN marking of the IPv4 TOS byte (whose header checksum must still hold).
func (t *Traffic) valid(b []byte, seq uint64) bool {
	if len(b) < MinSize || seq > 1<<40 {
		return false
	}
	if t.scratch == nil {
		t.scratch = emu.NewPool(0, emu.DefaultMaxFrame).Get()
		t.peer = &Traffic{cfg: t.cfg}
		t.peer.cfg.Local, t.peer.cfg.Remote = t.cfg.Remote, t.cfg.Local
	}
	if len(b) > emu.DefaultMaxFrame {
		return false
	}
	t.peer.cfg.FrameBytes = len(b)
	t.peer.cfg.ECN = b[ethLen+1]&3 != 0
	t.peer.build(t.scratch, seq)
	want := t.scratch.Bytes()
	for i := range b {
		if i == ethLen+1 || i == ethLen+10 || i == ethLen+11 {
			continue
		}
		if b[i] != want[i] {
			return false
		}
	}
	return (b[ethLen+1]&^3) == 0 && Checksum(b[ethLen:ethLen+ipLen], 0) == 0
}

// as4 is a's 4 bytes, zero if a is not an IPv4 address (an endpoint left
// unset: its frames are still well-formed, and a receiver without a peer
// counts whatever it gets as corrupt).
func as4(a netip.Addr) [4]byte {
	if !a.Is4() {
		return [4]byte{}
	}
	return a.As4()
}

// Checksum returns the Internet checksum (RFC 1071) of b, starting from the
// partial sum initial. A correct header sums to 0.
func Checksum(b []byte, initial uint32) uint16 { return fold(rawSum(b, initial)) }

// fold is the checksum of a raw sum: folded to 16 bits, complemented.
func fold(sum uint32) uint16 {
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// udpChecksum computes the UDP checksum over the pseudo-header and segment;
// over a segment with a correct checksum in it, it returns 0.
func udpChecksum(ip, udp []byte) uint16 {
	return Checksum(udp, pseudoSum(ip, len(udp)))
}

// pseudoSum is the raw sum of the UDP pseudo-header of an IPv4 header ip
// and a segment of n bytes.
func pseudoSum(ip []byte, n int) uint32 {
	var ps uint32
	for i := 12; i < 20; i += 2 {
		ps += uint32(ip[i])<<8 | uint32(ip[i+1])
	}
	return ps + 17 + uint32(n)
}

// rawSum adds b's 16-bit big-endian words to initial without folding.
func rawSum(b []byte, initial uint32) uint32 {
	sum := initial
	for len(b) >= 2 {
		sum += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	return sum
}

// L2Switch is a learning Ethernet switch: it learns source MACs per port and
// floods frames to unknown or broadcast destinations. A crash loses its table
// (it implements emu.Resetter).
type L2Switch struct {
	table map[[6]byte]int
	// Flooded and Forwarded count frames.
	Flooded, Forwarded uint64
}

// NewL2Switch returns an empty learning switch.
func NewL2Switch() *L2Switch { return &L2Switch{table: map[[6]byte]int{}} }

// Start implements emu.Node.
func (s *L2Switch) Start(*emu.Env) {}

// Timer implements emu.Node.
func (s *L2Switch) Timer(*emu.Env, uint64) {}

// Reset implements emu.Resetter.
func (s *L2Switch) Reset() { clear(s.table) }

// Receive implements emu.Node.
func (s *L2Switch) Receive(env *emu.Env, port int, pkts []*emu.Packet) {
	for _, p := range pkts {
		b := p.Bytes()
		if len(b) < ethLen {
			env.Free(p)
			continue
		}
		var src, dst [6]byte
		copy(src[:], b[6:12])
		copy(dst[:], b[0:6])
		if src[0]&1 == 0 {
			s.table[src] = port
		}
		if out, ok := s.table[dst]; ok && dst[0]&1 == 0 {
			if out == port {
				env.Free(p)
				continue
			}
			s.Forwarded++
			env.Send(out, p)
			continue
		}
		s.Flooded++
		last := env.Ports() - 1
		if last == port {
			last--
		}
		if last < 0 {
			env.Free(p)
			continue
		}
		for o := 0; o < last; o++ {
			if o != port {
				env.Send(o, env.Clone(p))
			}
		}
		env.Send(last, p)
	}
}
