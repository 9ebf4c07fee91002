package emu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Ethernet and IPv4 sizes the link model needs to read ECN bits and MTUs.
const (
	etherHdrLen   = 14
	ipv4MinHeader = 20
	// MinMTU is the smallest MTU a link accepts: the IPv4 minimum (RFC 791).
	MinMTU = 68
	// DefaultMTU is the MTU of a link whose MTUBytes is zero.
	DefaultMTU = 1500
	// DefaultQueuePackets bounds a link's queue when neither QueuePackets
	// nor QueueBytes is set.
	DefaultQueuePackets = 1024
)

// LinkConfig describes one direction of a link. The zero value is an ideal
// link: infinite rate, no delay, a 1500-byte MTU and a 1024-packet queue.
type LinkConfig struct {
	// BitsPerSecond is the line rate; 0 means infinitely fast (no
	// serialization delay). Serialization delay is exact in integer
	// nanoseconds: the fractional remainder is carried to the next packet of
	// a busy link, so the long-run rate is exact.
	BitsPerSecond int64
	// Delay is the propagation delay.
	Delay time.Duration
	// Jitter adds a uniform random delay in [0, Jitter] to each packet.
	// Jitter alone never reorders: a packet never overtakes the one before
	// it (use Impairments.Reorder for that).
	Jitter time.Duration
	// MTUBytes is the largest IPv4 packet (frame minus the 14-byte Ethernet
	// header) the link carries; larger frames are dropped and counted. 0
	// means DefaultMTU.
	MTUBytes int
	// OverheadBytes is added to each frame's length for serialization only:
	// e.g. 24 for Ethernet's preamble, start delimiter, FCS and inter-frame
	// gap, which frames in this emulator do not carry.
	OverheadBytes int
	// QueuePackets and QueueBytes bound the drop-tail queue in front of the
	// transmitter (the packet being serialized is not in it). 0 means no
	// bound of that kind; if both are 0, DefaultQueuePackets applies.
	QueuePackets int
	QueueBytes   int
	// ECNThresholdBytes: an ECN-capable IPv4 packet that finds more than this
	// many bytes queued is marked CE. 0 disables marking.
	ECNThresholdBytes int
	// Impairments are the random channel effects.
	Impairments Impairments
}

// Impairments are random effects applied to each packet as it leaves the
// transmitter. Each link direction draws from its own generator, seeded from
// the run seed and the link's name.
type Impairments struct {
	// Loss is the Bernoulli probability that a packet is lost on the wire.
	Loss float64
	// GilbertElliott, if set, adds bursty loss (applied after Loss).
	GilbertElliott *GilbertElliott
	// Duplicate is the probability that a packet arrives twice.
	Duplicate float64
	// Reorder is the probability that a packet is held back by ReorderDelay
	// extra, letting later packets overtake it.
	Reorder float64
	// ReorderDelay is the extra delay of a reordered packet; 0 means 10 µs.
	ReorderDelay time.Duration
	// Corrupt is the probability that one random bit of a packet is flipped
	// on the wire. The receiving port's MAC finds the bad FCS and drops the
	// frame before any node sees it, as real hardware does (Drops.FCS, and
	// the port's RxFCSErrors): corruption on a link behaves like loss.
	Corrupt float64
	// CorruptUndetected is the probability that one random bit is flipped
	// where the FCS does not catch it (past the MAC: a NIC or switch buffer,
	// a DMA error): the frame is delivered damaged, and only the protocols'
	// end-to-end checks (RoCE's ICRC) can tell.
	CorruptUndetected float64
}

// GilbertElliott is the two-state bursty loss model. In the good state a
// packet is lost with probability LossGood, in the bad state with LossBad;
// after each packet the state moves good→bad with probability PGoodToBad and
// bad→good with PBadToGood. With LossGood 0 and LossBad 1, loss bursts have a
// mean length of 1/PBadToGood packets.
type GilbertElliott struct {
	PGoodToBad, PBadToGood float64
	LossGood, LossBad      float64
}

// ConfigError reports a configuration field with a value that makes no sense.
type ConfigError struct {
	Where string // what was being configured, e.g. "link h1:0<->s:0 (h1→s)"
	Field string // the field, e.g. "Impairments.Loss"
	Value any
	Why   string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("emu: %s: %s = %v: %s", e.Where, e.Field, e.Value, e.Why)
}

func checkProb(where, field string, p float64) error {
	if math.IsNaN(p) || p < 0 || p > 1 {
		return &ConfigError{where, field, p, "must be a probability in [0, 1]"}
	}
	return nil
}

// Validate reports the first field of c that makes no sense, naming it and
// its value.
func (c *LinkConfig) Validate(where string) error {
	switch {
	case c.BitsPerSecond < 0:
		return &ConfigError{where, "BitsPerSecond", c.BitsPerSecond, "must be ≥ 0 (0 means unlimited)"}
	case c.Delay < 0:
		return &ConfigError{where, "Delay", c.Delay, "must be ≥ 0"}
	case c.Jitter < 0:
		return &ConfigError{where, "Jitter", c.Jitter, "must be ≥ 0"}
	case c.MTUBytes != 0 && c.MTUBytes < MinMTU:
		return &ConfigError{where, "MTUBytes", c.MTUBytes, fmt.Sprintf("must be 0 (default %d) or at least %d, the IPv4 minimum", DefaultMTU, MinMTU)}
	case c.MTUBytes > 65535:
		return &ConfigError{where, "MTUBytes", c.MTUBytes, "must be at most 65535"}
	case c.OverheadBytes < 0:
		return &ConfigError{where, "OverheadBytes", c.OverheadBytes, "must be ≥ 0"}
	case c.QueuePackets < 0:
		return &ConfigError{where, "QueuePackets", c.QueuePackets, "must be ≥ 0"}
	case c.QueueBytes < 0:
		return &ConfigError{where, "QueueBytes", c.QueueBytes, "must be ≥ 0"}
	case c.ECNThresholdBytes < 0:
		return &ConfigError{where, "ECNThresholdBytes", c.ECNThresholdBytes, "must be ≥ 0"}
	}
	return c.Impairments.Validate(where)
}

// Validate reports the first impairment that makes no sense.
func (im *Impairments) Validate(where string) error {
	for _, f := range []struct {
		name string
		p    float64
	}{
		{"Impairments.Loss", im.Loss},
		{"Impairments.Duplicate", im.Duplicate},
		{"Impairments.Reorder", im.Reorder},
		{"Impairments.Corrupt", im.Corrupt},
		{"Impairments.CorruptUndetected", im.CorruptUndetected},
	} {
		if err := checkProb(where, f.name, f.p); err != nil {
			return err
		}
	}
	if im.ReorderDelay < 0 {
		return &ConfigError{where, "Impairments.ReorderDelay", im.ReorderDelay, "must be ≥ 0"}
	}
	if ge := im.GilbertElliott; ge != nil {
		for _, f := range []struct {
			name string
			p    float64
		}{
			{"Impairments.GilbertElliott.PGoodToBad", ge.PGoodToBad},
			{"Impairments.GilbertElliott.PBadToGood", ge.PBadToGood},
			{"Impairments.GilbertElliott.LossGood", ge.LossGood},
			{"Impairments.GilbertElliott.LossBad", ge.LossBad},
		} {
			if err := checkProb(where, f.name, f.p); err != nil {
				return err
			}
		}
	}
	return nil
}

// Drops counts packets a link direction dropped, by cause.
type Drops struct {
	LinkDown uint64 // offered while down, or queued/in flight when it went down
	MTU      uint64 // larger than the MTU
	Queue    uint64 // queue full (drop-tail)
	Loss     uint64 // lost on the wire (Bernoulli, Gilbert–Elliott, loss bursts)
	FCS      uint64 // corrupted on the wire, dropped by the receiving MAC (bad FCS)
}

// Total returns the number of drops of all causes.
func (d Drops) Total() uint64 { return d.LinkDown + d.MTU + d.Queue + d.Loss + d.FCS }

// LinkStats are the counters of one link direction.
type LinkStats struct {
	SentPackets      uint64 // offered by the sending port
	SentBytes        uint64
	DeliveredPackets uint64 // handed to the receiving port (duplicates included)
	DeliveredBytes   uint64
	Drops            Drops
	Duplicated       uint64 // extra copies made
	Reordered        uint64 // packets held back to be overtaken
	Corrupted        uint64 // packets with a flipped bit (FCS-dropped or not)
	ECNMarked        uint64 // packets marked CE
	// QueueHighWaterPackets and QueueHighWaterBytes are the largest queue
	// seen behind the transmitter.
	QueueHighWaterPackets int
	QueueHighWaterBytes   int
}

// endpoint is one end of a link: a node's port, or an external backend.
type endpoint struct {
	node int // index into Network.nodes, or -1 for an external port
	port int
	ext  *extPort
}

type queued struct {
	start int64 // when its transmission starts
	bytes int
}

// linkDir is one direction of a link: a transmitter with a drop-tail queue,
// then the wire with its delay and random effects.
type linkDir struct {
	// The fields every packet reads or writes (enqueue, scheduleArrival,
	// popArrival, arrive) come first, so that a hop touches few cache
	// lines of its direction; the configuration and the rest after.
	up    bool
	epoch uint32
	idx   int32
	// plain: no random effect applies (no impairment configured, no
	// overlay open), so enqueue draws nothing; kept by refresh whenever
	// the configuration or an overlay changes.
	plain bool
	geBad bool

	busyUntil int64 // when the transmitter has sent all it holds
	rem       int64 // carried remainder of serialization, in bit·ns units over bps
	qBytes    int
	lastArr   int64 // latest in-order arrival (jitter never reorders)

	// The in-order arrivals, earliest first, linked by Packet.next: the
	// first has an entry in the scheduler's queue, the rest wait behind
	// it, so the queue holds one entry per busy direction instead of one
	// per packet in flight.
	first, last *Packet
	inOrderAt   int64         // the latest arrival scheduled in order
	q           deque[queued] // waiting to start transmission
	to          endpoint
	extraDelay  int64

	stats LinkStats
	cfg   LinkConfig

	name string
	link *Link
	from endpoint
	rng  *rand.Rand

	// Fault overlays, added to the configured values while a window is open.
	extraLoss      float64
	extraCorrupt   float64
	extraDuplicate float64
	extraReorder   float64
	extraUndetect  float64
	extraJitter    int64
}

func (d *linkDir) mtu() int {
	if d.cfg.MTUBytes == 0 {
		return DefaultMTU
	}
	return d.cfg.MTUBytes
}

func (d *linkDir) limits() (pkts, bytes int) {
	pkts, bytes = d.cfg.QueuePackets, d.cfg.QueueBytes
	if pkts == 0 && bytes == 0 {
		pkts = DefaultQueuePackets
	}
	return pkts, bytes
}

// drain forgets queue entries whose transmission has started by now.
func (d *linkDir) drain(now int64, bp *blockPool[queued]) {
	for d.q.len() > 0 && d.q.front().start <= now {
		d.qBytes -= d.q.pop(bp).bytes
	}
}

// serialization returns how long a frame of bytes takes to send, in ns,
// carrying the remainder (d.rem) to the next frame so that no time is lost
// to rounding.
func (d *linkDir) serialization(bytes int) int64 {
	bps := d.cfg.BitsPerSecond
	if bps == 0 {
		return 0
	}
	num := int64(bytes+d.cfg.OverheadBytes)*8*int64(time.Second) + d.rem
	d.rem = num % bps
	return num / bps
}

// refresh recomputes plain after a change of the configuration or of an
// overlay.
func (d *linkDir) refresh() {
	im := &d.cfg.Impairments
	d.plain = im.Loss == 0 && im.GilbertElliott == nil && d.cfg.Jitter == 0 && im.Reorder == 0 &&
		im.Corrupt == 0 && im.CorruptUndetected == 0 && im.Duplicate == 0 &&
		d.extraLoss == 0 && d.extraCorrupt == 0 && d.extraDuplicate == 0 && d.extraReorder == 0 &&
		d.extraUndetect == 0 && d.extraJitter == 0
}

func (d *linkDir) chance(p float64) bool {
	return p > 0 && (p >= 1 || d.rng.Float64() < p)
}

// either is the probability of p or a window's extra q (independent).
func either(p, q float64) float64 {
	if q <= 0 {
		return p
	}
	return 1 - (1-p)*(1-math.Min(q, 1))
}

// lost draws whether the packet is lost on the wire.
func (d *linkDir) lost() bool {
	p := d.cfg.Impairments.Loss
	if d.extraLoss > 0 {
		p = 1 - (1-p)*(1-math.Min(d.extraLoss, 1))
	}
	lost := d.chance(p)
	if ge := d.cfg.Impairments.GilbertElliott; ge != nil {
		if d.geBad {
			lost = d.chance(ge.LossBad) || lost
			if d.chance(ge.PBadToGood) {
				d.geBad = false
			}
		} else {
			lost = d.chance(ge.LossGood) || lost
			if d.chance(ge.PGoodToBad) {
				d.geBad = true
			}
		}
	}
	return lost
}

// markECN sets CE on an ECN-capable IPv4 frame and fixes its header checksum.
// It reports whether it marked.
func markECN(frame []byte) bool {
	if len(frame) < etherHdrLen+ipv4MinHeader || binary.BigEndian.Uint16(frame[12:14]) != 0x0800 {
		return false
	}
	ip := frame[etherHdrLen:]
	if ip[0]>>4 != 4 {
		return false
	}
	ecn := ip[1] & 3
	if ecn == 0 || ecn == 3 {
		return false
	}
	old := binary.BigEndian.Uint16(ip[0:2])
	ip[1] |= 3
	// Incremental checksum update, RFC 1624: HC' = ~(~HC + ~m + m').
	sum := uint32(^binary.BigEndian.Uint16(ip[10:12])) + uint32(^old) + uint32(binary.BigEndian.Uint16(ip[0:2]))
	sum = (sum & 0xffff) + (sum >> 16)
	sum = (sum & 0xffff) + (sum >> 16)
	binary.BigEndian.PutUint16(ip[10:12], ^uint16(sum))
	return true
}

// Link is a full-duplex link between two ports. Its methods that change it
// at run time (SetImpairments, SetUp) must be called from the run's own
// goroutine: from a Network.At callback, or before the run starts.
type Link struct {
	net  *Network
	name string
	dirs [2]*linkDir
}

// Dir names one direction of a link: AtoB from the first port given to
// Connect to the second, BtoA back.
type Dir int

const (
	AtoB Dir = 0
	BtoA Dir = 1
)

func (d Dir) String() string {
	if d == AtoB {
		return "a→b"
	}
	return "b→a"
}

// Name returns the link's name, "a:0<->b:1".
func (l *Link) Name() string { return l.name }

// PortRef names one end of a link: a node's port, or an external port
// (Node is then the backend's name and Port is -1).
type PortRef struct {
	Node string
	Port int
}

// Ends returns the link's two ends, A (the first given to Connect) and B.
func (l *Link) Ends() (a, b PortRef) {
	ref := func(e endpoint) PortRef {
		if e.node < 0 {
			if e.ext != nil {
				return PortRef{Node: e.ext.name, Port: -1}
			}
			return PortRef{Port: -1}
		}
		return PortRef{Node: l.net.nodes[e.node].name, Port: e.port}
	}
	return ref(l.dirs[0].from), ref(l.dirs[0].to)
}

// Stats returns the counters of one direction.
func (l *Link) Stats(d Dir) LinkStats { return l.dirs[d&1].stats }

// Config returns the current configuration of one direction.
func (l *Link) Config(d Dir) LinkConfig { return l.dirs[d&1].cfg }

// SetImpairments replaces the random effects of one direction. Packets
// already queued or on the wire keep the fate they were given; packets sent
// from now on get the new effects.
func (l *Link) SetImpairments(d Dir, im Impairments) error {
	ld := l.dirs[d&1]
	if err := im.Validate(ld.name); err != nil {
		return err
	}
	ld.cfg.Impairments = im
	ld.refresh()
	return nil
}

// SetConfig replaces the whole configuration of one direction at run time,
// keeping packets already queued or in flight.
func (l *Link) SetConfig(d Dir, c LinkConfig) error {
	ld := l.dirs[d&1]
	if err := c.Validate(ld.name); err != nil {
		return err
	}
	ld.cfg = c
	ld.refresh()
	return nil
}

// Up reports whether the link is up (its A→B direction).
func (l *Link) Up() bool { return l.dirs[0].up }

// DirUp reports whether direction d is up.
func (l *Link) DirUp(d Dir) bool { return l.dirs[d&1].up }

// SetUp brings both directions up or down. Going down drops every packet
// queued or in flight (counted as Drops.LinkDown); while down, packets
// offered are dropped too.
func (l *Link) SetUp(up bool) {
	l.SetDirUp(AtoB, up)
	l.SetDirUp(BtoA, up)
}

// SetDirUp brings direction d up or down, as SetUp does for both: a
// one-way failure (a bad transceiver lane, a unidirectional fibre cut).
func (l *Link) SetDirUp(d Dir, up bool) {
	ld := l.dirs[d&1]
	if ld.up == up {
		return
	}
	ld.up = up
	if !up {
		ld.epoch++
		ld.q.clear(&l.net.qBlocks)
		ld.qBytes = 0
		ld.busyUntil, ld.rem = l.net.now, 0
	}
}
